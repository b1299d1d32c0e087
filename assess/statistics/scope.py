"""What a report describes: exactly the samples of the runs it was asked about.

A cell's key is shared by every run that renders the same configuration, so the index holds one
cell's samples from many sweeps (other seeds, other prompts, other launchers). A report of a sweep
must describe that sweep: each of its cells over the (prompt, seed) pairs its runs asked for, and
the anchor over the same pairs. `Scope` holds those pairs per (cell, split), and the scoped numbers
(sample counts, metric means, speed) are computed from them alone; a cell's label is the override
line of the scope's own run. A scope over runs of more than one sweep is a union, and says so.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from render.compose.metric_registry import SPECS, SPEED_NOISE, SPEED_SPECS
from assess.metrics.speed import cell_speed
from assess.statistics.noise import noisy_reason

Key = tuple[str, int]  # (text identity, seed): a sample of a cell by content


@dataclass
class CellScope:
    """One (cell, split) as a report sees it."""

    cell_key: str
    split: str
    anchor_cell_key: str
    is_anchor: bool
    keys: set[Key] = field(default_factory=set)  # the (prompt, seed) pairs the scope asks of this cell
    runs: list[dict[str, Any]] = field(default_factory=list)  # the scope's own runs of this cell (index rows)
    overrides: list[str] = field(default_factory=list)  # the override line that renders it
    groups: set[str] = field(default_factory=set)  # the sweep folders (or single runs) its samples come from

    @property
    def n_expected(self) -> int:
        return len(self.keys)


@dataclass
class Scope:
    cells: dict[tuple[str, str], CellScope]
    groups: list[str]  # sweep folders (or run directories outside any sweep) the scope's runs belong to

    @property
    def is_union(self) -> bool:
        return len(self.groups) > 1


def group_of(run: dict[str, Any]) -> str:
    """The sweep folder of an index `runs` row, or the run directory itself when it is in no sweep."""
    return run["sweep"] or run["path"]


def _keys(run: dict[str, Any]) -> set[Key]:
    shas = json.loads(run.get("prompt_shas") or "null") or [f"id:{p}" for p in json.loads(run["prompt_ids"])]
    return {(p, int(s)) for p in shas for s in json.loads(run["seeds"])}


def scope_of(runs: Iterable[dict[str, Any]]) -> Scope:
    """The scope of these runs (index `runs` rows): their cells, and their anchors on the same pairs."""
    cells: dict[tuple[str, str], CellScope] = {}
    groups: list[str] = []
    runs = sorted(runs, key=lambda r: (r["started_at"] or "", r["path"]))
    for run in runs:
        keys, group, split = _keys(run), group_of(run), run["split"]
        if not run["is_anchor"] and group not in groups:
            groups.append(group)
        own = cells.setdefault((run["cell_key"], split), CellScope(
            run["cell_key"], split, run["anchor_cell_key"], bool(run["is_anchor"])))
        own.keys |= keys
        own.runs.append(run)
        own.groups.add(group)
        own.overrides = json.loads(run["overrides"] or "[]") or own.overrides  # the latest run's line
        if not run["is_anchor"]:
            anchor = cells.setdefault((run["anchor_cell_key"], split), CellScope(
                run["anchor_cell_key"], split, run["anchor_cell_key"], True))
            anchor.keys |= keys
            anchor.overrides = anchor.overrides or json.loads(run["anchor_overrides"] or "[]")
    if not groups:  # only anchor runs
        groups = sorted({group_of(r) for r in runs})
    return Scope(cells, groups)


def path_scope(index: Any, path: Any) -> Scope | None:
    """The scope of the indexed runs under `path` (a sweep, a run, or an output root): what `assess status --json`
    answers about, as the report and the exports do; None when none of them is indexed."""
    from render.rundir import find_run_dirs

    paths = [str(p) for p in find_run_dirs(path)]
    rows: list[dict[str, Any]] = []
    for start in range(0, len(paths), 500):
        chunk = paths[start : start + 500]
        rows += index.query(f"SELECT * FROM runs WHERE path IN ({','.join('?' * len(chunk))})", chunk)
    return scope_of(rows) if rows else None


# -- scoped numbers -------------------------------------------------------------------------


@dataclass
class ScopedCell:
    """The numbers of one cell over its scope's pairs."""

    samples: list[dict[str, Any]]  # index `samples` rows of the scope's pairs that exist
    values: dict[str, float | None]  # metric -> mean over the scope's samples (speed: the cell statistic)
    reasons: dict[str, str]  # metric -> why it has no value (the most common reason)
    reused_elsewhere: int  # samples of the scope rendered by a run outside it (their speed: as rendered there)
    sizes: dict[str, int] = field(default_factory=dict)  # set metric -> the pairs its value is over (over the split)
    noisy: str | None = None  # why its speed is too noisy to rank it (assess.statistics.noise), when it is


def sample_rows(index: Any, cell: CellScope) -> list[dict[str, Any]]:
    return [r for r in index.samples_of(cell.cell_key, cell.split) if (r["prompt_sha"], r["seed"]) in cell.keys]


def scoped_cell(index: Any, cell: CellScope) -> ScopedCell:
    samples = sample_rows(index, cell)
    values: dict[str, float | None] = {}
    reasons: dict[str, str] = {}
    scores = index.scores_of(cell.cell_key)
    present = {(s["prompt_sha"], s["seed"]) for s in samples}
    by_metric: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in scores:
        if (row["prompt_sha"], row["seed"]) in present:
            by_metric[row["metric"]].append(row)
    for metric, rows in by_metric.items():
        available = [r["value"] for r in rows if r["value"] is not None]
        values[metric] = statistics.fmean(available) if available else None
        if not available:
            reasons[metric] = Counter(r["unavailable_reason"] for r in rows).most_common(1)[0][0]
    own_runs = {r["path"] for r in cell.runs}
    speed = cell_speed(samples, _spent(cell, samples), [r.get("ref_drift") for r in cell.runs if r["n_rendered"]])
    for spec in SPEED_SPECS:
        values[spec.name] = speed[spec.name].value
        if speed[spec.name].unavailable_reason:
            reasons[spec.name] = speed[spec.name].unavailable_reason or ""
    reused = sum(1 for s in samples if s["run_path"] not in own_runs) if own_runs else 0
    sizes: dict[str, int] = {}
    for row in index.set_scores_of(cell.cell_key, cell.split):  # set metrics (CMMD): one value over the split's pairs
        values[row["metric"]], sizes[row["metric"]] = row["value"], row["n"]
        if row["value"] is None:
            reasons[row["metric"]] = row["unavailable_reason"]
    noise = speed[SPEED_NOISE.name]
    noisy = noisy_reason(noise.value, noise.detail)
    return ScopedCell(samples, {m: v for m, v in values.items() if m in SPECS}, reasons, reused, sizes, noisy)


def _spent(cell: CellScope, samples: list[dict[str, Any]]) -> float:
    """Device seconds: what the scope's runs of the cell spent (reused samples cost 0); for an anchor reached
    only as the reference, what rendering its scoped samples cost where they were rendered."""
    if cell.runs:
        return float(sum(r["gpu_s"] for r in cell.runs))
    loads: dict[str, float] = {}
    for s in samples:
        loads[s["run_path"]] = max(loads.get(s["run_path"], 0.0), s["load_s"] or 0.0)
    return sum(s.get("device_s") or s["latency_s"] or 0.0 for s in samples) + sum(loads.values())
