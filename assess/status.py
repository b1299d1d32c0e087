"""What each cell of a sweep is doing, from the run directories alone (no index needed).

States: done (DONE.json) · failed (FAILED.json, with its category) · running · crashed (no
terminal record and the process or job is gone) · pending (listed in SWEEP.json, no run
directory yet) · aborted (pending, but the sweep's process is gone and no job was submitted for
it: it will never start) · unknown (a SLURM job that neither squeue nor sacct can be asked about) ·
unreadable (a run directory whose records cannot be parsed: named with its problem, the others still shown).
A running cell whose projected time passes twice its estimate is flagged `slow` (the watchdog,
render.rundir.watchdog); nothing is killed. A finished cache cell says how many steps its samples reused
(assess.report.speed_notes): "..., the cache never engaged" when none.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from assess.errors import NoRunsFound, RunDirError
from assess.statistics.noise import noise
from assess.report.speed_notes import engagement_note
from render.rundir import (JOBS_JSON, SWEEP_JSON, CellState, RunDir, SweepCell, SweepInfo, cell_label, find_run_dirs,
                           is_sweep_folder, load_run, load_sweep, parse_time, writer_state)
from render.rundir.watchdog import project
from render.rundir.records import SampleRecord
from render.rundir.redact import redact

STATES = tuple(s.value for s in CellState if s != CellState.SUBMITTED)  # what `assess status` shows


@dataclass(frozen=True)
class CellStatus:
    name: str  # the cell as the user wrote it, its overrides (render.rundir.cell_label); an unreadable one's folder
    state: CellState
    cell_key: str | None
    category: str | None  # failed: FAILED.json category
    n_done: int
    n_expected: int | None
    elapsed_s: float | None
    eta_s: float | None
    detail: str
    path: str | None
    slow: bool = False  # the watchdog: projected time past twice the estimate
    sweep: str | None = None  # the sweep folder holding the run (None: a run outside any sweep)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def process_state(run: RunDir) -> tuple[CellState, str]:
    """running / crashed / unknown for a run without a terminal record."""
    return writer_state(run.run.writer)


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else max((end - start).total_seconds(), 0.0)


def run_status(run: RunDir, now: datetime) -> CellStatus:
    started = parse_time(run.run.started_at)
    done = sum(1 for s in run.samples if _image_there(run, s))
    terminal, category, eta, slow = run.terminal, None, None, False
    if terminal is not None:
        state = terminal.kind
        category = terminal.category
        detail = terminal.data.get("message", "") if state == CellState.FAILED else _noisy(run, terminal.data)
        elapsed = terminal.data.get("wall_s") or _seconds(started, parse_time(terminal.finished_at))
    else:
        state, detail = process_state(run)
        if state == CellState.RUNNING:
            elapsed = _seconds(started, now)
            if done and elapsed is not None:
                eta = max(run.n_expected - done, 0) * elapsed / done
            projection = project(run.run, run.samples, now)
            if projection is not None and projection.overdue:
                slow, detail = True, f"SLOW: {projection.message()}; {detail}"
        else:
            times = [t for t in (parse_time(s.finished_at) for s in run.samples) if t is not None]
            last = max(times, default=None)
            elapsed = _seconds(started, last)
    if run.problems:
        detail = "; ".join(filter(None, [detail, f"{len(run.problems)} unreadable samples.jsonl line(s)"]))
    if state == CellState.DONE:
        records = (r.as_dict() for r in run.samples)  # read only for a cache cell (asdict of 100,000 samples: seconds)
        detail = "; ".join(filter(None, [detail, engagement_note(run.cell, records)]))
    return CellStatus(cell_label(run.overrides, run.is_anchor), state, run.cell_key, category, done, run.n_expected, elapsed, eta,
                      detail.splitlines()[0] if detail else "", str(run.path), slow, str(run.sweep) if run.sweep else None)


def _noisy(run: RunDir, done: dict[str, Any]) -> str:
    """"NOISY: why" for a finished cell whose own warm samples' speed is too noisy to rank (assess.statistics.noise), else ""."""
    from render.rundir.session_log import read_sessions

    warm = [s for s in run.samples if not s.warmup and not s.reused_from and s.latency_s is not None]
    figure = noise(warm, [(done.get("timing") or {}).get("drift")])
    if not figure.noisy or any(s.complete for s in read_sessions(run.path)[0]):  # side by side: not in its figure
        return ""
    where = run.sweep or run.path
    return figure.reason().replace("noisy: ", "NOISY: ", 1) + f": time it side by side: assess retime {where}"


def _unreadable(folder: Path, error: Exception, sweep: Path | None = None) -> CellStatus:
    sweep = sweep or (folder.parent if is_sweep_folder(folder.parent) else None)
    return CellStatus(folder.name, CellState.UNREADABLE, None, None, 0, None, None, None,
                      f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}", str(folder),
                      sweep=str(sweep) if sweep else None)


def _read_sweep(folder: Path, rows: list[CellStatus]) -> SweepInfo | None:
    """The sweep's SWEEP.json; when it cannot be read, a row naming it (its runs are still shown, not its pending cells)."""
    try:
        return load_sweep(folder)
    except (RunDirError, OSError, ValueError) as error:
        rows.append(_unreadable(folder / SWEEP_JSON, error, sweep=folder))
        return None


def _matches(cell: SweepCell, run: RunDir) -> bool:
    if cell.subdir:
        return cell.subdir == run.path.name
    if cell.cell_key:
        return cell.cell_key == run.cell_key
    if cell.overrides:
        return sorted(cell.overrides) == sorted(run.overrides)
    return cell.job_num is not None and run.path.name.split("_", 1)[0] == str(cell.job_num)


def _submitted(sweep: SweepInfo) -> set[int]:
    """Cell numbers that a launcher handed to a scheduler (JOBS.json): they may start without the sweep's process."""
    try:
        jobs = json.loads((sweep.path / JOBS_JSON).read_text())
        return {int(cell["num"]) for job in jobs for cell in job.get("cells", [])}
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def _pending(cell: SweepCell, sweep: SweepInfo, submitted: set[int]) -> CellStatus:
    name = cell_label(cell.overrides) if cell.overrides else cell.subdir or f"cell {cell.job_num}"
    state, detail = CellState.PENDING, ""
    sweep_state, why = writer_state(sweep.record, ask_slurm=False)
    if sweep_state == CellState.CRASHED and cell.job_num not in submitted:
        state, detail = CellState.ABORTED, f"the sweep's process ended before this cell started ({why})"
    return CellStatus(name, state, cell.cell_key, None, 0, cell.n_expected, None, None, detail, None, False, str(sweep.path))


def status(path: Path | str, now: datetime | None = None) -> list[CellStatus]:
    """One CellStatus per cell under `path` (a sweep folder, a run directory, or any folder)."""
    now = now or datetime.now(timezone.utc)
    root = Path(path).resolve()
    rows: list[CellStatus] = []
    sweep = _read_sweep(root, rows) if root.is_dir() and is_sweep_folder(root) else None
    try:
        folders = find_run_dirs(root)
    except NoRunsFound:
        if sweep is None and not rows:
            raise
        folders = []
    runs, found = [], []
    for folder in folders:  # one run's samples in memory at a time: its row, then the run without them
        try:
            run = load_run(folder)
        except (RunDirError, OSError, ValueError) as error:  # named, and the other cells are shown all the same
            rows.append(_unreadable(folder, error))
            continue
        found.append(run_status(run, now))
        runs.append(replace(run, samples=[]))
    unreadable = {Path(row.path).name for row in rows if row.path}
    rows = found + rows
    if sweep is not None:
        submitted = _submitted(sweep)
        rows += [_pending(cell, sweep, submitted) for cell in sweep.cells
                 if not any(_matches(cell, r) for r in runs) and cell.subdir not in unreadable]
    else:
        rows += _pending_of_sweeps_below(runs)
    return rows


# -- a folder holding several sweeps (outputs/): rows grouped by sweep folder ------------------------


def _pending_of_sweeps_below(runs: list[RunDir]) -> list[CellStatus]:
    """The pending cells of every sweep folder that holds some of these runs."""
    rows: list[CellStatus] = []
    for folder in sorted({run.sweep for run in runs if run.sweep is not None}):
        info = _read_sweep(folder, rows)
        if info is not None:
            mine = [r for r in runs if r.sweep == folder]
            submitted = _submitted(info)
            rows += [_pending(cell, info, submitted) for cell in info.cells if not any(_matches(cell, r) for r in mine)]
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
    slow = sum(r.slow for r in rows)
    flag = f"; {slow} SLOW (projected past twice the estimate)" if slow else ""
    return f"{len(rows)} cell(s): {', '.join(parts)}; samples {done}/{expected}{flag}"


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

    colours = {CellState.DONE: "green", CellState.FAILED: "red", CellState.CRASHED: "red", CellState.RUNNING: "cyan",
               CellState.PENDING: "dim", CellState.ABORTED: "red", CellState.UNKNOWN: "yellow",
               CellState.UNREADABLE: "red"}
    console = Console()
    groups = by_sweep(rows)
    for folder, members in groups:
        table = Table(*HEADER, title=escape(f"sweep {folder}") if len(groups) > 1 else None)
        for row in members:
            cols = [escape(redact(c)) for c in _columns(row)]
            cols[2] = f"[{colours.get(row.state, 'white')}]{cols[2]}[/]"
            table.add_row(*cols)
        console.print(table)
        if len(groups) > 1:
            console.print(summary_line(members))
    console.print(summary_line(rows))


def _image_there(run: RunDir, sample: SampleRecord) -> bool:
    """Whether the sample's image file is there, inside its run folder (a path out of it counts as missing)."""
    try:
        return run.image_path(sample).is_file()
    except OSError:
        return False


def with_drift(rows: list[CellStatus], db: Path) -> list[CellStatus]:
    """Each parallel cell whose samples drift from its width-1 twin's (assess.statistics.parity, as last scored into the index
    at `db`) with `PARALLEL-DRIFT: ...` first in its detail, the lossless floor beside it; the rows as they are
    without an index."""
    if not db.is_file():
        return rows
    from assess.index.database import Index
    from assess.statistics.parity import drifting, floor_beside

    with Index.open(db, create=False) as index:
        flags = {key: f"{flag}; {floor_beside(index, key)}" if (flag := drifting(index.parity(key))) else None
                 for key in {r.cell_key for r in rows if r.cell_key}}
    return [replace(r, detail="; ".join(filter(None, [flag.replace("parallel-drift", "PARALLEL-DRIFT", 1), r.detail])))
            if r.cell_key and (flag := flags.get(r.cell_key)) else r for r in rows]
