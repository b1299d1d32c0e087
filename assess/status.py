"""What each cell of a sweep is doing, from the run directories alone (no index needed).

States: done (DONE.json) · failed (FAILED.json, with its category) · running · crashed (no
terminal record and the process or job is gone) · pending (listed in SWEEP.json, no run
directory yet) · unknown (a SLURM job that neither squeue nor sacct can be asked about).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from assess.errors import NoRunsFound
from assess.rundir import RunDir, SweepCell, SweepInfo, find_run_dirs, is_sweep_folder, load_run, load_sweep, parse_time

SLURM_ACTIVE = {"RUNNING", "PENDING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "STAGE_OUT"}
STATES = ("done", "failed", "running", "crashed", "pending", "unknown")


@dataclass(frozen=True)
class CellStatus:
    name: str  # the run directory's name, or the SWEEP.json cell's folder/overrides when pending
    state: str
    cell_key: str | None
    category: str | None  # failed: FAILED.json category
    n_done: int
    n_expected: int | None
    elapsed_s: float | None
    eta_s: float | None
    detail: str
    path: str | None
    sweep: str | None = None  # the sweep folder holding the run (None: a run outside any sweep)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _run(cmd: list[str]) -> str | None:
    """stdout of a SLURM command, or None when it is not installed or fails."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def slurm_state(job_id: str) -> tuple[str, str]:
    """(running | crashed | unknown, detail) of a SLURM job, from squeue, then sacct."""
    queued = _run(["squeue", "-h", "-j", job_id, "-o", "%T"])
    if queued and queued.split():
        state = queued.split()[0].upper()
        if state in SLURM_ACTIVE:
            return "running", f"slurm job {job_id} {state}"
    accounted = _run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"])
    if accounted and accounted.split():
        state = accounted.split()[0].upper()
        if state in SLURM_ACTIVE:
            return "running", f"slurm job {job_id} {state}"
        return "crashed", f"slurm job {job_id} {state}"
    if queued is None and accounted is None:
        return "unknown", f"slurm job {job_id}: squeue/sacct not available here"
    return "crashed", f"slurm job {job_id} is not in squeue or sacct"


def pid_alive(pid: int, started_at: datetime | None) -> bool:
    """The process exists, is not a zombie, and was started before the run (not a reused pid)."""
    import psutil

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        created = process.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return psutil.pid_exists(pid) if pid > 0 else False
    return started_at is None or created <= started_at.timestamp() + 1.0


def process_state(run: RunDir) -> tuple[str, str]:
    """running / crashed / unknown for a run without a terminal record."""
    job = run.run.get("job") or {}
    if job.get("slurm_job_id"):
        return slurm_state(str(job["slurm_job_id"]))
    host, pid = run.run.get("host"), run.run.get("pid")
    if pid is None:
        return "unknown", "run.json records no pid"
    if host == socket.gethostname():
        started = parse_time(run.run.get("started_at"))
        if pid_alive(int(pid), started):
            return "running", f"pid {pid}"
        return "crashed", f"pid {pid} is gone"
    return "running", f"on host {host} (pid {pid}, not checked from here)"


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else max((end - start).total_seconds(), 0.0)


def run_status(run: RunDir, now: datetime) -> CellStatus:
    started = parse_time(run.run.get("started_at"))
    done = sum(1 for s in run.samples if run.image_path(s).is_file())
    terminal, category, eta = run.terminal, None, None
    if terminal is not None:
        state = terminal.kind
        category = terminal.category
        detail = terminal.data.get("message", "") if state == "failed" else ""
        elapsed = terminal.data.get("wall_s") or _seconds(started, parse_time(terminal.finished_at))
    else:
        state, detail = process_state(run)
        if state == "running":
            elapsed = _seconds(started, now)
            if done and elapsed is not None:
                eta = max(run.n_expected - done, 0) * elapsed / done
        else:
            times = [t for t in (parse_time(s.finished_at) for s in run.samples) if t is not None]
            last = max(times, default=None)
            elapsed = _seconds(started, last)
    if run.problems:
        detail = "; ".join(filter(None, [detail, f"{len(run.problems)} unreadable samples.jsonl line(s)"]))
    return CellStatus(run.path.name, state, run.cell_key, category, done, run.n_expected, elapsed, eta,
                      detail.splitlines()[0] if detail else "", str(run.path), str(run.sweep) if run.sweep else None)


def _matches(cell: SweepCell, run: RunDir) -> bool:
    if cell.subdir:
        return cell.subdir == run.path.name
    if cell.cell_key:
        return cell.cell_key == run.cell_key
    if cell.overrides:
        return sorted(cell.overrides) == sorted(run.overrides)
    return cell.job_num is not None and run.path.name.split("_", 1)[0] == str(cell.job_num)


def _pending(cell: SweepCell, sweep: SweepInfo) -> CellStatus:
    name = cell.subdir or (f"{cell.job_num}_" if cell.job_num is not None else "") + ",".join(cell.overrides)
    return CellStatus(name, "pending", cell.cell_key, None, 0, cell.n_expected, None, None, "", None, str(sweep.path))


def status(path: Path | str, now: datetime | None = None) -> list[CellStatus]:
    """One CellStatus per cell under `path` (a sweep folder, a run directory, or any folder)."""
    now = now or datetime.now(timezone.utc)
    root = Path(path).resolve()
    sweep = load_sweep(root) if root.is_dir() and is_sweep_folder(root) else None
    try:
        runs = [load_run(p) for p in find_run_dirs(root)]
    except NoRunsFound:
        if sweep is None:
            raise
        runs = []
    rows = [run_status(run, now) for run in runs]
    if sweep is not None:
        rows += [_pending(cell, sweep) for cell in sweep.cells if not any(_matches(cell, r) for r in runs)]
    else:
        rows += _pending_of_sweeps_below(runs)
    return rows


# -- a folder holding several sweeps (outputs/): rows grouped by sweep folder ------------------------


def _pending_of_sweeps_below(runs: list[RunDir]) -> list[CellStatus]:
    """The pending cells of every sweep folder that holds some of these runs."""
    rows = []
    for folder in sorted({run.sweep for run in runs if run.sweep is not None}):
        info = load_sweep(folder)
        if info is not None:
            mine = [r for r in runs if r.sweep == folder]
            rows += [_pending(cell, info) for cell in info.cells if not any(_matches(cell, r) for r in mine)]
    return rows


def by_sweep(rows: list[CellStatus]) -> list[tuple[str, list[CellStatus]]]:
    """(sweep folder, its rows) in path order; runs outside any sweep are grouped as "(no sweep)"."""
    groups: dict[str, list[CellStatus]] = {}
    for row in rows:
        groups.setdefault(row.sweep or NO_SWEEP, []).append(row)
    return sorted(groups.items(), key=lambda item: (item[0] == NO_SWEEP, item[0]))


NO_SWEEP = "(no sweep)"


def summary_line(rows: list[CellStatus]) -> str:
    counts = Counter(r.state for r in rows)
    parts = [f"{counts[s]} {s}" for s in STATES if counts[s]]
    done = sum(r.n_done for r in rows)
    expected = sum(r.n_expected or 0 for r in rows)
    return f"{len(rows)} cell(s): {', '.join(parts)}; samples {done}/{expected}"


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds:.1f}s"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _columns(row: CellStatus) -> list[str]:
    state = f"{row.state} ({row.category})" if row.category else row.state
    expected = "?" if row.n_expected is None else str(row.n_expected)
    return [row.name, row.cell_key or "-", state, f"{row.n_done}/{expected}", format_duration(row.elapsed_s),
            format_duration(row.eta_s), row.detail]


HEADER = ["cell", "cell key", "state", "samples", "elapsed", "eta", "detail"]


def format_plain(rows: list[CellStatus]) -> str:
    """One line per cell, aligned columns, and a summary line; rows of several sweeps come grouped by sweep folder,
    each group with its own summary."""
    table = [HEADER] + [_columns(r) for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADER) - 1)]

    def line(cols: list[str]) -> str:
        text = "  ".join(c.ljust(w) for c, w in zip(cols[:-1], widths, strict=True))
        return (text + ("  " + cols[-1] if cols[-1] else "")).rstrip()

    groups = by_sweep(rows)
    if len(groups) <= 1:
        return "\n".join([line(HEADER), *(line(_columns(r)) for r in rows), summary_line(rows)])
    out = [line(HEADER)]
    for folder, members in groups:
        out += [f"sweep {folder}:", *("  " + line(_columns(r)) for r in members), "  " + summary_line(members)]
    return "\n".join([*out, f"all {len(groups)} sweep folders: {summary_line(rows)}"])


def print_table(rows: list[CellStatus]) -> None:
    """A rich table (for a terminal)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    colours = {"done": "green", "failed": "red", "crashed": "red", "running": "cyan", "pending": "dim",
               "unknown": "yellow"}
    console = Console()
    groups = by_sweep(rows)
    for folder, members in groups:
        table = Table(*HEADER, title=escape(f"sweep {folder}") if len(groups) > 1 else None)
        for row in members:
            cols = [escape(c) for c in _columns(row)]
            cols[2] = f"[{colours.get(row.state, 'white')}]{cols[2]}[/]"
            table.add_row(*cols)
        console.print(table)
        if len(groups) > 1:
            console.print(summary_line(members))
    console.print(summary_line(rows))
