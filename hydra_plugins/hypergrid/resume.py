"""A rerun continues its sweep: the same command after an interruption renders into the interrupted sweep's folder.

Skip-if-done already renders only what is missing; without this, the rerun would do so into a new sweep folder and
leave the first with a cancelled cell: two sweeps to track, score and report. A sweep folder is continued when

- the sweep folder was not given (`hydra.sweep.dir` is the default, dated one: a given folder is reused anyway),
- its SWEEP.json lists exactly the cells of this sweep (job number, overrides and cell key, in order),
- it is not finished (a cell without DONE.json),
- and nothing runs it any more: its process is gone (same host) and none of its scheduler jobs is queued or running.

The newest such folder is taken; its SWEEP.json is rewritten for this process (render.rundir.sweep).
"""

# No `from __future__ import annotations`: Hydra's plugin scan runs this module outside sys.modules.
import json
import socket
from pathlib import Path
from typing import Any, Optional, Sequence

from omegaconf import DictConfig, open_dict, read_write

from render.rundir import DONE, JOBS_JSON, SWEEP_JSON, CellState, load_sweep, parse_time, pid_alive, slurm_state


def _given(config: DictConfig) -> bool:
    return any(o.split("=", 1)[0].lstrip("+~") == "hydra.sweep.dir" for o in config.hydra.overrides.hydra)


def _cells(job_overrides: Sequence[Sequence[str]], jobs: Sequence[Any]) -> list[tuple[int, tuple[str, ...], str]]:
    return [(num, tuple(o), job.cell.key) for num, (o, job) in enumerate(zip(job_overrides, jobs))]


def _still_running(folder: Path, record: dict) -> bool:
    """Its process is alive (or on another host: it cannot be told), or one of its scheduler jobs is active."""
    if record.get("host") != socket.gethostname():
        return True
    pid = record.get("pid")
    if isinstance(pid, int) and pid_alive(pid, parse_time(record.get("started_at"))):
        return True
    jobs_file = folder / JOBS_JSON
    if jobs_file.exists():
        try:
            jobs = json.loads(jobs_file.read_text())
        except (OSError, ValueError):
            return True  # unreadable: leave it be
        ids = [str(j.get("job_id")) for j in jobs if isinstance(j, dict)]
        if str(record.get("launcher", "")).lower().startswith("slurm"):
            return any(slurm_state(i)[0] == CellState.RUNNING for i in ids)
        return any(pid_alive(int(i)) for i in ids if i.isdigit())  # the gpus launcher's jobs: local processes
    return False


def interrupted(config: DictConfig, job_overrides: Sequence[Sequence[str]], jobs: Sequence[Any]) -> Optional[Path]:
    """The interrupted sweep folder this sweep continues (module doc), or None."""
    if _given(config):
        return None
    mine = Path(str(config.hydra.sweep.dir))
    root = mine.parent.parent  # <out_root>/multirun/<day>/<time-id>
    wanted = _cells(job_overrides, jobs)
    found = []
    for record_file in root.glob(f"*/*/{SWEEP_JSON}"):
        folder = record_file.parent
        if folder.resolve() == mine.resolve():
            continue
        try:
            sweep = load_sweep(folder)
        except (OSError, ValueError):
            continue
        if sweep is None or [(c.job_num, c.overrides, c.cell_key) for c in sweep.cells] != wanted:
            continue
        if all((folder / str(c.subdir) / DONE).exists() for c in sweep.cells if c.subdir):
            continue
        if not _still_running(folder, sweep.record):
            found.append((str(sweep.started_at or ""), folder))
    return max(found)[1] if found else None


def continue_in(config: DictConfig, composed: Sequence[DictConfig], folder: Path) -> None:
    """Point the sweep (its master config, each cell's composed config, and any config composed again from the
    master's overrides, as a submitted job does) at `folder`."""
    override = f"hydra.sweep.dir={json.dumps(str(folder))}"
    with read_write(config), open_dict(config):
        config.hydra.sweep.dir = str(folder)
        config.hydra.overrides.hydra.append(override)
    for job in composed:
        with read_write(job), open_dict(job):
            job.hydra.sweep.dir = str(folder)


def other_sweep(folder: Path, job_overrides: Sequence[Sequence[str]]) -> Optional[str]:
    """Why `folder` cannot take this sweep: its SWEEP.json records another sweep (other cells, by their overrides),
    whose runs and record this one would mix with (SWEEP.json would then describe only the second); None when it
    holds no sweep, or this same one (a re-run: skip-if-done resumes it)."""
    try:
        sweep = load_sweep(folder) if (folder / SWEEP_JSON).is_file() else None
    except (OSError, ValueError):
        return None  # an unreadable record is `assess status`'s to name; the cells' own checks still apply
    if sweep is None:
        return None
    theirs = [tuple(c.overrides) for c in sweep.cells]
    if theirs == [tuple(o) for o in job_overrides]:
        return None
    from render.rundir import cell_label

    shown = ", ".join(cell_label(o) for o in theirs[:4]) + (f", ... ({len(theirs)} cells)" if len(theirs) > 4 else "")
    return (f"hydra.sweep.dir={folder}: the folder already holds another sweep ({shown}); this sweep's cells would "
            f"mix with its runs and its SWEEP.json would describe only this one. Give a folder of its own: "
            f"hydra.sweep.dir={free_sibling(folder)} (or leave hydra.sweep.dir out for a new dated folder)")


def free_sibling(folder: Path) -> Path:
    """The first `<folder>-2`, `<folder>-3`, ... that does not exist."""
    n = 2
    while folder.with_name(f"{folder.name}-{n}").exists():
        n += 1
    return folder.with_name(f"{folder.name}-{n}")
