"""Run directories: atomic writes, sample records, terminal records, and skip-if-done lookups.

The layout and every file's fields are specified in docs/run-directory.md.
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
import shutil
import socket
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

RUN_JSON = "run.json"
SAMPLES = "samples.jsonl"
DONE = "DONE.json"
FAILED = "FAILED.json"
IMAGES = "images"
FAILURE_CATEGORIES = ("oom", "timeout", "backend-unavailable", "non-finite-output", "cancelled", "error")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary name in the same folder, fsync, rename: all of `data` or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".{os.getpid()}.tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, payload: Any) -> None:
    atomic_write_bytes(path, (json.dumps(payload, indent=2, default=str) + "\n").encode())


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line with a single O_APPEND write, then fsync: a kill leaves the line or nothing."""
    line = (json.dumps(record, default=str) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_records(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a samples.jsonl; a torn last line (no newline) is ignored."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def image_name(prompt_id: str, seed: int) -> str:
    return f"{prompt_id}__s{seed}.png"


def terminal_state(run_dir: Path) -> str | None:
    """"done", "failed" or None (running or crashed)."""
    if (run_dir / DONE).exists():
        return "done"
    if (run_dir / FAILED).exists():
        return "failed"
    return None


def write_failed(run_dir: Path, category: str, message: str, traceback: str, **extra: Any) -> None:
    assert category in FAILURE_CATEGORIES, category
    payload = {"category": category, "message": message, "traceback": traceback, "failed_at": now_iso(), **extra}
    atomic_write_json(run_dir / FAILED, payload)


def write_done(run_dir: Path, **summary: Any) -> None:
    atomic_write_json(run_dir / DONE, {"finished_at": now_iso(), **summary})


def iter_run_dirs(root: Path) -> Iterator[Path]:
    """Every folder under `root` holding a run.json (not descending into images/ or .hydra/)."""
    if not root.exists():
        return
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        if any(e.name == RUN_JSON for e in entries):
            yield Path(folder)
        stack.extend(Path(e.path) for e in entries if e.is_dir(follow_symlinks=False) and e.name not in (IMAGES, ".hydra"))


@dataclass(frozen=True)
class ExistingSample:
    run_dir: Path
    record: dict[str, Any]

    @property
    def image(self) -> Path:
        return self.run_dir / self.record["image"]


class SampleStore:
    """Finished samples anywhere under the output root, by (cell key, prompt id, seed)."""

    def __init__(self, out_root: Path) -> None:
        self.out_root = out_root
        self._by_cell: dict[str, dict[tuple[str, int], ExistingSample]] | None = None

    def _scan(self) -> dict[str, dict[tuple[str, int], ExistingSample]]:
        by_cell: dict[str, dict[tuple[str, int], ExistingSample]] = {}
        for run_dir in iter_run_dirs(self.out_root):
            try:
                run = json.loads((run_dir / RUN_JSON).read_text())
                cell_key = run["cell_key"]
            except (OSError, json.JSONDecodeError, KeyError):
                continue
            if terminal_state(run_dir) is None and not process_alive(run):
                remove_stale_temporaries(run_dir)
            samples = by_cell.setdefault(cell_key, {})
            for record in read_records(run_dir / SAMPLES):
                existing = ExistingSample(run_dir, record)
                key = (record["prompt_id"], int(record["seed"]))
                if key not in samples and existing.image.is_file():
                    samples[key] = existing
        return by_cell

    def refresh(self) -> None:
        self._by_cell = None

    def existing(self, cell_key: str) -> dict[tuple[str, int], ExistingSample]:
        if self._by_cell is None:
            self._by_cell = self._scan()
        return self._by_cell.get(cell_key, {})

    def pending(self, cell_key: str, sample_ids: list[tuple[str, int]]) -> list[tuple[str, int]]:
        done = self.existing(cell_key)
        return [s for s in sample_ids if s not in done]

    def add(self, cell_key: str, run_dir: Path, record: dict[str, Any]) -> None:
        if self._by_cell is not None:
            self._by_cell.setdefault(cell_key, {})[(record["prompt_id"], int(record["seed"]))] = ExistingSample(run_dir, record)


def link_sample(existing: ExistingSample, run_dir: Path, out_root: Path) -> dict[str, Any]:
    """Make a finished sample part of `run_dir` without rendering it: hard link (or copy) its image."""
    target = run_dir / existing.record["image"]
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        try:
            os.link(existing.image, tmp)
        except OSError:
            shutil.copy2(existing.image, tmp)
        os.replace(tmp, target)
    try:
        source = str(existing.run_dir.relative_to(out_root))
    except ValueError:
        source = str(existing.run_dir)
    return {**existing.record, "reused_from": source, "load_s": 0.0, "finished_at": now_iso()}


def process_alive(run: dict[str, Any]) -> bool:
    """Whether the process that wrote this run.json may still be running (unknowable on another host)."""
    if run.get("host") != socket.gethostname() or not isinstance(run.get("pid"), int):
        return True
    try:
        os.kill(run["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(run_dir: Path) -> None:
    """A killed writer can leave its temporary file (never a truncated image: those are only renamed whole)."""
    for tmp in list(run_dir.glob(".*.tmp")) + list((run_dir / IMAGES).glob(".*.tmp")):
        tmp.unlink(missing_ok=True)


@contextmanager
def exclusive(lock_file: Path, *, wait: bool) -> Iterator[bool]:
    """An advisory lock (flock) between processes; yields whether it was acquired."""
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


def host_identity() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}
