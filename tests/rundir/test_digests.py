"""Image digests cached by file state (render.rundir.digests, issue 22): a finished sample is verified by content
before reuse, and a file in a state already hashed is not read again; any write or replacement is hashed again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from render.rundir import digests as digests_module
from render.rundir.digests import DIGESTS, TICK_NS, DigestCache
from render.rundir.files import STATE_DIR, file_digest


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files the cache had to read."""
    reads: list[Path] = []

    def counting(path: Path) -> tuple[str, int]:
        reads.append(Path(path))
        return file_digest(path)

    monkeypatch.setattr(digests_module, "file_digest", counting)
    return reads


def aged(path: Path, data: bytes, seconds: float = 10.0) -> Path:
    """`data` written to `path`, its mtime set `seconds` back (a file finished a while ago)."""
    path.write_bytes(data)
    stat = path.stat()
    back = int(seconds * 1e9)
    os.utime(path, ns=(stat.st_atime_ns - back, stat.st_mtime_ns - back))
    return path


def test_a_file_hashed_once_is_known_by_its_state_in_a_later_process(tmp_path: Path, hashed: list[Path]) -> None:
    image = aged(tmp_path / "a.png", b"pixels" * 100)
    assert DigestCache(tmp_path).digest(image) == file_digest(image)[0]
    assert DigestCache(tmp_path).digest(image) == file_digest(image)[0]  # a new cache: read from digests.jsonl
    assert hashed == [image]
    link = tmp_path / "b.png"
    os.link(image, link)  # a sample linked into another run directory: the same inode, the same entry
    assert DigestCache(tmp_path).digest(link) == file_digest(image)[0] and hashed == [image]


def test_a_file_written_again_is_hashed_again_even_at_the_same_size(tmp_path: Path, hashed: list[Path]) -> None:
    image = aged(tmp_path / "a.png", b"A" * 600)
    cache = DigestCache(tmp_path)
    first = cache.digest(image)
    with open(image, "r+b") as f:  # damaged in place: same inode, same size
        f.write(b"B")
    assert cache.digest(image) != first and len(hashed) == 2


def test_a_file_swapped_for_one_of_the_same_size_and_mtime_is_hashed_again(tmp_path: Path, hashed: list[Path]) -> None:
    image = aged(tmp_path / "a.png", b"A" * 600)
    cache = DigestCache(tmp_path)
    first = cache.digest(image)
    stat = image.stat()
    other = tmp_path / "other.png"
    other.write_bytes(b"B" * 600)
    os.replace(other, image)  # another inode under the same name...
    os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # ...with the old mtime put back
    assert cache.digest(image) != first and len(hashed) == 2


def test_an_entry_recorded_within_the_files_timestamp_tick_is_not_trusted(tmp_path: Path, hashed: list[Path]) -> None:
    image = tmp_path / "fresh.png"
    image.write_bytes(b"just written")  # a write in the same tick could leave this mtime as it is
    DigestCache(tmp_path).digest(image)
    DigestCache(tmp_path).digest(image)
    assert len(hashed) == 2
    stat = image.stat()
    os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns - TICK_NS - 1))  # the tick long past: recorded anew...
    DigestCache(tmp_path).digest(image)
    DigestCache(tmp_path).digest(image)  # ...and trusted from then on
    assert len(hashed) == 3


def test_torn_or_foreign_lines_cost_a_hash_and_an_unwritable_cache_costs_nothing_else(tmp_path: Path,
                                                                                  hashed: list[Path]) -> None:
    image = aged(tmp_path / "a.png", b"pixels")
    (tmp_path / STATE_DIR).mkdir()
    (tmp_path / STATE_DIR / DIGESTS).write_text('{"dev": 1, "ino": 2}\n{"torn": \nnot json\n')
    assert DigestCache(tmp_path).digest(image) == file_digest(image)[0]
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the state folder would be")
    assert DigestCache(blocked).digest(image) == file_digest(image)[0]
