"""Image digests cached by file state, so that verifying a finished sample before reuse reads its file once.

A sample is reused only when its image is the file its record hashed (sha256). Hashing every image again on
every run makes a re-run of a finished FLUX sweep read gigabytes; so each digest, once computed (or known at
write time), is kept in `<out_root>/.hypergrid/digests.jsonl` under the file's state: device, inode, size and
modification time. A file in that same state has not been written since (writing moves its mtime; replacing
it makes a new inode), so it is the same bytes; a file in any other state is hashed again. As git does with its
index, an entry recorded within TICK_NS of the file's mtime is not trusted (a write in the same timestamp tick
could leave the mtime as it was): the file is hashed again and the entry recorded anew. Hard links share one
inode, so one entry serves every run directory a sample was linked into. The file is a cache: a lost or torn
line costs one hash, never a wrong answer, so it is appended without fsync.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from render.rundir.files import STATE_DIR, file_digest, read_lines

DIGESTS = "digests.jsonl"
TICK_NS = 2_000_000_000  # the coarsest mtime granularity of a common filesystem (FAT, some NFS): 2 s
Key = tuple[int, int, int, int]  # (device, inode, size, mtime_ns)


def _key(stat: os.stat_result) -> Key:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


class DigestCache:
    """The digests known to an output root, by file state (read once, appended to as files are hashed)."""

    def __init__(self, out_root: Path) -> None:
        self.path = out_root / STATE_DIR / DIGESTS
        self._known: dict[Key, tuple[str, int]] | None = None  # state -> (sha256, when it was recorded)

    def _entries(self) -> dict[Key, tuple[str, int]]:
        if self._known is None:
            self._known = {}
            try:
                lines = read_lines(self.path)
            except OSError:  # an unreadable cache is an empty one
                lines = []
            for entry in lines:
                try:
                    key = (int(entry["dev"]), int(entry["ino"]), int(entry["size"]), int(entry["mtime_ns"]))
                    self._known[key] = (str(entry["sha256"]), int(entry["at_ns"]))
                except (KeyError, TypeError, ValueError):
                    continue  # a line of another shape: ignored, as a torn one is
        return self._known

    def digest(self, path: Path) -> str:
        """The sha256 of `path`'s content: from the cache when the file is in a state it has seen (and saw after
        the file's timestamp tick), else hashed, and kept when the file did not change while it was read."""
        before = os.stat(path)
        key = _key(before)
        known = self._entries().get(key)
        if known is not None and known[1] >= before.st_mtime_ns + TICK_NS:
            return known[0]
        found, _ = file_digest(path)
        if _key(os.stat(path)) == key:
            self._add(key, found)
        return found

    def _add(self, key: Key, sha256: str) -> None:
        at_ns = time.time_ns()
        self._entries()[key] = (sha256, at_ns)
        line = json.dumps({"dev": key[0], "ino": key[1], "size": key[2], "mtime_ns": key[3], "sha256": sha256,
                           "at_ns": at_ns}) + "\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:  # one write of one line (O_APPEND)
                f.write(line)
        except OSError:
            pass  # a cache that cannot be written is a cache that does not help: nothing is lost
