"""The contract's writes: atomic, complete or taken back, never merged with the next record, umask modes."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest

from render import rundir
from render.rundir import files


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_every_written_file_follows_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        rundir.atomic_write_bytes(tmp_path / "image.png", b"png")
        rundir.atomic_write_json(tmp_path / "run.json", {"a": 1})
        rundir.append_record(tmp_path / "samples.jsonl", {"a": 1})
        rundir.write_done(tmp_path, n_samples=0)
        rundir.write_sweep(tmp_path, "InProcessLauncher", [])
    finally:
        os.umask(old)
    for name in ("image.png", "run.json", "samples.jsonl", "DONE.json", "SWEEP.json"):
        assert mode(tmp_path / name) == 0o666 & ~umask, name


def test_a_short_write_is_taken_back_and_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "samples.jsonl"
    rundir.append_record(path, {"n": 1})
    real_write = os.write
    monkeypatch.setattr(files.os, "write", lambda fd, data: real_write(fd, bytes(data)[:7]))  # the disk fills up
    with pytest.raises(rundir.ShortWrite):
        rundir.append_record(path, {"n": 2})
    monkeypatch.setattr(files.os, "write", real_write)
    rundir.append_record(path, {"n": 3})
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"n": 1}, {"n": 3}]


def test_a_torn_line_left_by_a_kill_never_merges_with_the_next_record(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    rundir.append_record(path, {"prompt_id": "a", "seed": 0, "image": "images/a__s0.png", "latency_s": 1.0})
    with open(path, "a") as f:
        f.write('{"prompt_id": "b", "se')  # killed mid-write, before the truncation could run
    rundir.append_record(path, {"prompt_id": "c", "seed": 0, "image": "images/c__s0.png", "latency_s": 1.0})
    records, problems = rundir.read_samples(tmp_path, "k")
    assert [r.prompt_id for r in records] == ["a", "c"] and len(problems) == 1


def test_an_atomic_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rundir.atomic_write_bytes(tmp_path / "x", b"old")

    def enospc(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "write", enospc)
    with pytest.raises(OSError):
        rundir.atomic_write_bytes(tmp_path / "x", b"new")
    assert (tmp_path / "x").read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["x"]


@pytest.mark.parametrize("name", ["../../../../escaped/pwn", "a/b", "..", ".hidden", "", "a b", "x" * 129, "é"])
def test_names_that_could_leave_their_folder_are_refused(name: str) -> None:
    with pytest.raises(rundir.UnsafeName, match="cannot be used in a file name"):
        rundir.check_name(name, "prompt id")


def test_the_split_rule_compares_normalised_texts() -> None:
    dev = [("dev-000", "A red circle."), ("dev-001", "two  blue squares")]
    holdout = [("holdout-000", "a red circle"), ("holdout-001", "Two blue squares!"), ("holdout-002", "a star")]
    assert [(d, h) for d, h, _ in rundir.shared_texts(dev, holdout)] == [("dev-000", "holdout-000"), ("dev-001", "holdout-001")]
    assert rundir.text_hash("A red circle.") == rundir.text_hash("a  red circle") != rundir.text_hash("a red square")


@pytest.mark.parametrize("umask", [0o002, 0o077])
def test_the_interval_memo_follows_the_umask(tmp_path: Path, umask: int) -> None:
    """Issue 61: sqlite creates its file 0644 whatever the umask; the memo beside the index is created as the index is."""
    from assess.statistics.memo import memo_path, remembered, remembering

    old = os.umask(umask)
    try:
        with remembering(tmp_path / "index.db"):
            remembered("mean", 0, ([1.0, 2.0],), lambda: (1.0, 2.0))
    finally:
        os.umask(old)
    assert mode(memo_path(tmp_path / "index.db")) == 0o666 & ~umask


class _Saved:
    """A pipeline whose save_pretrained writes a file and a folder, as diffusers' does."""

    def save_pretrained(self, folder: Path) -> None:
        (Path(folder) / "model_index.json").write_text("{}")
        (Path(folder) / "unet").mkdir()


@pytest.mark.parametrize("umask", [0o002, 0o022])
def test_a_built_model_folder_follows_the_umask(tmp_path: Path, umask: int) -> None:
    """A model built into the cache (the tiny model, a family's twin) is read by every colleague sharing the cache:
    its folder was mkdtemp's 0700."""
    from render.models.twins import ensure_built

    old = os.umask(umask)
    try:
        built = ensure_built(tmp_path / "models" / "tiny-1", _Saved)
    finally:
        os.umask(old)
    assert mode(built) == 0o777 & ~umask and mode(built / "unet") == 0o777 & ~umask
    assert mode(built / "model_index.json") == 0o666 & ~umask


@pytest.mark.parametrize("umask", [0o002, 0o022])
def test_a_training_checkpoint_follows_the_umask(tmp_path: Path, umask: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shapes model's checkpoint.pt was mkstemp's 0600."""
    from types import SimpleNamespace

    from render.models.shapes import train

    monkeypatch.setattr(train, "_trainable", lambda pipe: {})
    state = SimpleNamespace(step=1, seconds=0.0, pipe=None, ema={}, optimizer=SimpleNamespace(state_dict=dict))
    old = os.umask(umask)
    try:
        path = train.save_checkpoint(state, train.TrainConfig(), tmp_path)  # type: ignore[arg-type]
    finally:
        os.umask(old)
    assert mode(path) == 0o666 & ~umask
