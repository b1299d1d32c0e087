"""Finding run directories: under a folder, and wherever the project wrote for an output root.

Every run directory registers itself in `<out_root>/.hypergrid/runs.jsonl` before its first sample,
wherever Hydra put it (`hydra.sweep.dir` / `hydra.run.dir` may lie outside out_root). So the
output root knows every folder written for it: skip-if-done, the budget and the climb see them all.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Iterator, Sequence

from render.rundir.errors import InvalidRunDirectory, NoRunsFound, NotARunDirectory, RunDirError
from render.rundir.files import DONE, FAILED, IMAGES, RUN_JSON, SAMPLES, STATE_DIR, append_record, now_iso
from render.rundir.records import RunDir, is_sweep_folder, load_run
from render.rundir.session_log import TIMINGS

log = logging.getLogger("render")
REGISTRY = "runs.jsonl"
_SKIP_DIRS = {IMAGES, ".hydra", "__pycache__", ".git", STATE_DIR}


def iter_run_dirs(root: Path) -> Iterator[Path]:
    """Every folder at or under `root` holding a run.json (run directories do not nest)."""
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root):
        if RUN_JSON in filenames:
            dirnames.clear()
            yield Path(dirpath)
            continue
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)


# What a run folder's content is read from: its records, its sample records, its terminal record, its side-by-side
# timings, and the images folder (whose own stat changes when an image is added, removed or renamed into place) with
# each of its files (an image written into in place, `cp other.png images/x.png`, leaves the folder's stat as it was).
STAMPED = (RUN_JSON, SAMPLES, DONE, FAILED, TIMINGS, IMAGES)


def _images_state(folder: Path) -> str:
    """Each file of the images folder: its name, size, inode, mtime and ctime (stat(2), nothing read)."""
    try:
        with os.scandir(folder) as entries:
            stats = [(e.name, e.stat(follow_symlinks=False)) for e in entries]
    except (FileNotFoundError, NotADirectoryError):
        return "-"
    return ";".join(f"{n}:{st.st_size}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}" for n, st in sorted(stats))


def content_stamp(run_dir: Path) -> str:
    """The identity of what a run folder holds, from stat(2) alone (no file is read): a digest of each contract
    file's size, inode, mtime and ctime, or its absence, and of each image's. Any write, append, replacement or removal changes it, even
    one whose mtime was set back (no user call sets a file's ctime), so an unchanged stamp means the folder is as it
    was when it was last indexed (assess.scoring.ingest skips it without reading its samples). A copy of the folder has
    another stamp (and is read again): the stamp errs towards reading."""
    parts = []
    for name in STAMPED:
        try:
            st = os.stat(run_dir / name)
        except FileNotFoundError:
            parts.append(f"{name}:-")
            continue
        parts.append(f"{name}:{st.st_size}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}")
    parts.append(_images_state(run_dir / IMAGES))
    return hashlib.blake2b("|".join(parts).encode(), digest_size=16).hexdigest()


def registry_path(out_root: Path) -> Path:
    return out_root / STATE_DIR / REGISTRY


def register(out_root: Path, run_dir: Path, cell_key: str) -> None:
    """Record that `run_dir` holds samples of `cell_key` for this output root."""
    path = registry_path(out_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    append_record(path, {"cell_key": cell_key, "path": str(run_dir.resolve()), "registered_at": now_iso()})


class Registry:
    """The registry of an output root, read incrementally (it is append-only)."""

    def __init__(self, out_root: Path) -> None:
        self.path = registry_path(out_root)
        self._offset = 0
        self.by_cell: dict[str, list[Path]] = {}

    def update(self) -> list[tuple[str, Path]]:
        """Entries appended since the last call."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._offset += len(complete)
        new = []
        for line in complete.decode(errors="replace").splitlines():
            try:
                entry = json.loads(line)
                item = (str(entry["cell_key"]), Path(entry["path"]))
            except (ValueError, KeyError, TypeError):
                continue  # a torn line: the next append started a new one
            folders = self.by_cell.setdefault(item[0], [])
            if item[1] not in folders:
                folders.append(item[1])
                new.append(item)
        return new


def known_run_dirs(out_root: Path) -> list[Path]:
    """Run directories under `out_root` and those registered for it elsewhere, each once."""
    seen: dict[Path, None] = {p.resolve(): None for p in iter_run_dirs(out_root)}
    registry = Registry(out_root)
    registry.update()
    for folders in registry.by_cell.values():
        for folder in folders:
            if folder not in seen and (folder / RUN_JSON).is_file():
                seen[folder] = None
    return list(seen)


def scan_runs(out_root: Path) -> list[RunDir]:
    """Every readable run directory known to `out_root`; a broken one is logged and skipped."""
    runs = []
    for folder in known_run_dirs(out_root):
        try:
            runs.append(load_run(folder))
        except (InvalidRunDirectory, NotARunDirectory) as error:
            log.warning("skipping %s: %s", folder, error)
    return runs


def find_run_dirs(path: Path | str) -> list[Path]:
    """Run directories at or below `path` (a run, a sweep, or any folder such as outputs/).

    Raises NotARunDirectory or NoRunsFound, with what to do, when there is none.
    """
    root = Path(path).resolve()
    if root.is_file():
        raise NotARunDirectory(f"{path} is a file, not a folder: give a run directory, a sweep folder or an output "
                               f"root{' (its run directory: ' + str(root.parent) + ')' if root.name == RUN_JSON else ''}")
    if not root.is_dir():
        raise NotARunDirectory(f"{path}: no such folder")
    found = sorted(p.resolve() for p in iter_run_dirs(root))
    if found:
        return found
    if is_sweep_folder(root):
        raise NoRunsFound(f"sweep folder {path} has no run directories yet (no */{RUN_JSON}); nothing to score")
    raise NotARunDirectory(f"{path} is not a run directory (no {RUN_JSON}) and holds no run directory below it")


def run_dirs_under(path: Path | str) -> list[Path]:
    """`find_run_dirs`, and, when `path` is an output root, the run folders registered for it elsewhere:
    every run the output root knows."""
    found = find_run_dirs(path)
    root = Path(path).resolve()
    if registry_path(root).is_file():
        listed = set(found)
        found += [p for p in known_run_dirs(root) if p not in listed]
    return found


def twin_dirs(runs: Sequence[RunDir]) -> list[Path]:
    """The run folders of the parallel runs' width-1 twins, wherever they were rendered (`twins/`, or a sweep of the
    width-1 cell): their output root's registry, which every run folder joins before its first sample."""
    registries: dict[str, Registry] = {}
    found: dict[Path, None] = {}
    for run in runs:
        key, out_root = run.twin_key, run.run.out_root
        if key is None or not out_root:
            continue
        if out_root not in registries:
            registries[out_root] = Registry(Path(out_root))
            registries[out_root].update()
        found.update((p, None) for p in registries[out_root].by_cell.get(key, []) if (p / RUN_JSON).is_file())
    return list(found)


def load_runs(paths: Sequence[Path | str], with_anchors: bool = False, problems: list[str] | None = None) -> list[RunDir]:
    """Every run directory under `paths` (with the folders an output root registered), parsed; duplicates
    (same folder twice) collapse.

    with_anchors: also the anchor runs that the runs' run.json name (anchor.dir under out_root),
    when that folder exists: the renderer keeps them outside the sweep; and a parallel run's width-1 twin
    (`twin_dirs`), its reference for parity (assess.statistics.parity).
    problems: when given, a run directory that cannot be read is named there ("<path>: <problem>") and
    skipped, so one bad run does not hide the others; without it, it raises.
    """
    seen: dict[Path, RunDir | None] = {}

    def add(run_path: Path) -> None:
        if run_path in seen:
            return
        try:
            seen[run_path] = load_run(run_path)
        except (RunDirError, OSError, ValueError) as error:
            if problems is None:
                raise
            seen[run_path] = None
            problems.append(f"{run_path}: {type(error).__name__}: {error}")

    for path in paths:
        for run_path in run_dirs_under(path):
            add(run_path)
    if with_anchors:
        folders = {run.anchor_dir for run in seen.values() if run and not run.is_anchor and run.anchor_dir}
        for folder in sorted(f for f in folders if f is not None and f.is_dir()):
            for run_path in iter_run_dirs(folder):
                add(run_path.resolve())
        for run_path in twin_dirs([run for run in seen.values() if run is not None]):
            add(run_path)
    return [run for run in seen.values() if run is not None]
