"""File names of the contract and the only ways the project writes them: atomic, verified, umask-honouring.

A killed or starved writer leaves either the whole artefact or nothing: files are written to a
temporary name, fsynced and renamed; records are appended with one checked write and fsynced, and
a torn line can never merge with the next one.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from render.rundir.errors import ShortWrite

CONTRACT_VERSION = 3  # 3: the cell key holds the model's weights identity; text identity is NFKC-folded
RUN_JSON = "run.json"
SAMPLES = "samples.jsonl"
DONE = "DONE.json"
FAILED = "FAILED.json"
IMAGES = "images"
LOG = "render.log"
SWEEP_JSON = "SWEEP.json"
JOBS_JSON = "JOBS.json"
MULTIRUN_YAML = "multirun.yaml"
STATE_DIR = ".hypergrid"  # under out_root: the registry of run folders and the claims on samples


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _umask() -> int:
    """The process umask, read without changing it (os.umask would race with other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """What open(2) would give a new file: 0644 under umask 022."""
    return 0o666 & ~_umask()


def folder_mode() -> int:
    """What mkdir(2) would give a new folder: 0755 under umask 022 (mkdtemp makes 0700 whatever the umask)."""
    return 0o777 & ~_umask()


def create_empty(path: Path) -> None:
    """Create an empty file with open(2)'s mode unless it exists: a database file sqlite then opens follows the umask
    like every other file (sqlite itself creates 0644 whatever the umask allows; its -wal and -shm copy the mode)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    except FileExistsError:
        pass  # another process created it first


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path) -> tuple[str, int]:
    """(sha256 hex, size in bytes) of a file's content."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _write_all(fd: int, data: bytes) -> None:
    """os.write until everything is stored; a write that stores nothing raises ShortWrite (ENOSPC)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise ShortWrite(errno.ENOSPC, f"stored 0 of {len(view)} remaining bytes")
        view = view[written:]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary name in the same folder, fsync, rename: all of `data` or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".{os.getpid()}.tmp")
    try:
        try:
            _write_all(fd, data)
            os.fchmod(fd, file_mode())  # mkstemp creates 0600; colleagues on a shared filesystem must read it
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def create_json(path: Path, payload: Any) -> None:
    """Create `path` whole and exclusively (temporary file, fsync, link): FileExistsError when it exists, so of
    two concurrent writers exactly one wins and nobody ever reads a half record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".{os.getpid()}.tmp")
    try:
        try:
            _write_all(fd, (json.dumps(payload, indent=2, default=str) + "\n").encode())
            os.fchmod(fd, file_mode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def atomic_write_json(path: Path, payload: Any) -> None:
    atomic_write_bytes(path, (json.dumps(payload, indent=2, default=str) + "\n").encode())


@dataclass(frozen=True)
class FileState:
    """What tells a file changed without reading it: size, modification time, inode."""

    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, stat: os.stat_result) -> FileState:
        return cls(stat.st_size, stat.st_mtime_ns, stat.st_ino)

    @classmethod
    def at(cls, path: Path) -> FileState | None:
        try:
            return cls.of(os.stat(path))
        except FileNotFoundError:
            return None


@dataclass(frozen=True)
class Appended:
    """The file before and after one append; `alone`: nobody else wrote it in between (its size grew by exactly
    the bytes written), so a reader that had read `before` knows `after` without reading it again."""

    before: FileState
    after: FileState
    written: int

    @property
    def alone(self) -> bool:
        return self.after.inode == self.before.inode and self.after.size == self.before.size + self.written


def append_record(path: Path, record: dict[str, Any]) -> Appended:
    """Append one JSON line with a checked O_APPEND write, then fsync (see `append_records`)."""
    return append_records(path, [record])


def append_records(path: Path, records: list[dict[str, Any]]) -> Appended:
    """Append JSON lines with one checked O_APPEND write, then one fsync (a cell linking 60 finished samples
    pays one, not 60).

    The lines are stored whole or taken back: a short write is truncated away (and raises ShortWrite).
    Should a torn line still be there (a kill between write and truncate), the next append starts
    on a new line, so the torn one stays a single unreadable line that readers skip.
    """
    if not records:
        raise ValueError(f"{path}: no records to append")
    line = "".join(json.dumps(record, default=str) + "\n" for record in records).encode()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        before = FileState.of(os.fstat(fd))
        size = before.size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise ShortWrite(errno.ENOSPC, f"{path}: stored {written} of {len(line)} bytes of {len(records)} record(s)")
            os.fsync(fd)
        except OSError:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            raise
        return Appended(before, FileState.of(os.fstat(fd)), len(line))
    finally:
        os.close(fd)


def append_to_copies(paths: Iterable[Path], records: list[dict[str, Any]]) -> None:
    """Append `records` to every copy of a log (its folder made): the first copy must take them, a later one that
    cannot (an out_root that is gone) is skipped."""
    for i, path in enumerate(paths):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            append_records(path, records)
        except OSError:
            if i == 0:
                raise


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The records of an append-only JSON-lines file (a registry, a ledger); torn lines are skipped."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


@contextmanager
def exclusive(lock_file: Path, *, wait: bool) -> Iterator[bool]:
    """An advisory lock (flock) between processes, released when its process dies; yields whether it was acquired."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
