"""A self-contained HTML report of one or more sweeps, from the index.

The folder holds index.html (jinja2), pareto.png (matplotlib, Agg) and the images it shows (hard
links to the runs' images where it can, else copies), so it opens offline and survives moving.
Sections: leaderboard (cells x metrics with deltas and 95 % intervals against the anchor, anchors
marked), speed/quality Pareto plot (frontier drawn, anchors marked), contact sheets (prompts x
cells, one per swept axis) and failures (category, message, traceback, path of FAILED.json).

Longer than the house's ~300 lines: the leaderboard, the Pareto plot and the contact sheets are one
page built from one scope (assess.statistics.scope); the statistics themselves live in assess.statistics.compare.
"""

from __future__ import annotations

import gc
import json
import os
import shlex
import shutil
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from assess.statistics import speed_axis
from assess.verdicts.answer import Answer
from assess.errors import NotScored, RunDirError
from assess.statistics.memo import remembering
from assess.index.database import Index, cell_status
from assess.metrics import SPECS
from render.compose.metric_registry import SPEED_NOISE, leaderboard_specs, quality_metric_names
from render.rundir import FAILED, LOG, CellState, find_run_dirs, load_run, parse_override
from assess.report.outdir import check_out, staged
from render.rundir.redact import finalize, redact
from render.rundir.untrusted import contained, href, safe_component
from assess.statistics.scope import Scope, scope_of, scoped_cell
from assess.statistics.time_split import BOUND, CellStages, bound_note, cell_stages, stage_text
from assess.verdicts.recorded import recorded_verdicts
from assess.report.category_sheet import cell_categories, worst_prompts
from assess.statistics.side_by_side import SIDE_BY_SIDE
from assess.statistics.compare import CellComparison, Estimate, compare_cell
from assess.verdicts.table import Rule, sweep_verdict

MAX_PROMPTS = 8


@dataclass
class CellView:
    cell_key: str
    split: str
    anchor_cell_key: str
    is_anchor: bool
    status: str
    n_samples: int
    n_expected: int
    overrides: list[str]
    values: dict[str, float | None]  # metric -> its value over the scope's samples (assess.statistics.scope)
    reasons: dict[str, str]  # metric -> unavailable reason
    comparison: CellComparison | None = None
    label: str = ""
    n_values: int | None = None  # height x width x 3 of its images, when known
    keys: set[tuple[str, int]] = field(default_factory=set)  # the scope's (text identity, seed) pairs of this cell
    reused: int = 0  # samples of the scope rendered by a run outside it (their latency: as measured there)
    groups: list[str] = field(default_factory=list)  # the sweep folders its samples come from (a union: several)
    command: str = ""  # the runnable line that renders the row's samples
    mark: str = ""  # short name on the Pareto plot: A (anchor), 1, 2, ... in leaderboard order
    sizes: dict[str, int] = field(default_factory=dict)  # set metric -> its sample size (pairs with the anchor)
    noisy: str | None = None  # why its speed is too noisy to rank it (assess.statistics.noise)
    same_work_as: str | None = None  # the cell key of the earlier cell whose images it reproduces byte for byte
    stages: CellStages | None = None  # where its warm samples' time went (None: recorded before the split existed)

    @property
    def axes(self) -> dict[str, str]:
        parsed = (parse_override(o) for o in self.overrides)
        return dict(p for p in parsed if p is not None)


@dataclass
class Sheet:
    axis: str
    columns: list[dict[str, Any]]  # {"label", "cell_key", "is_anchor", "value"}
    rows: list[dict[str, Any]] = field(default_factory=list)  # {"prompt_id", "prompt", "seed", "images": [...]}


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}" if abs(value) < 1 else f"{value:.{digits + 1}g}"


def _interval_text(estimate: Estimate, signed: bool = False) -> str:
    value = f"{estimate.value:+.3g}" if signed else _fmt(estimate.value)
    if estimate.low is None or estimate.high is None:
        return value
    return f"{value} [{_fmt(estimate.low)}, {_fmt(estimate.high)}]"


def _bytes(value: float | None) -> str:
    if value is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value}"


def _label(overrides: list[str], cell_key: str, is_anchor: bool) -> str:
    text = " ".join(overrides) if overrides else cell_key
    return f"anchor: {text}" if is_anchor else text


# -- gathering ------------------------------------------------------------------------------


def _runs_in_index(index: Index, sweeps: list[Path]) -> tuple[list[dict[str, Any]], list[str]]:
    paths = [str(p) for sweep in sweeps for p in find_run_dirs(sweep)]
    rows: list[dict[str, Any]] = []
    for start in range(0, len(paths), 500):
        chunk = paths[start : start + 500]
        rows += index.query(f"SELECT * FROM runs WHERE path IN ({','.join('?' * len(chunk))})", chunk)
    found = {r["path"] for r in rows}
    missing = [p for p in paths if p not in found]
    if not rows:
        raise NotScored(
            f"none of the {len(paths)} run(s) under {', '.join(map(str, sweeps))} are in the index {index.path}: "
            f"run `assess score {' '.join(map(str, sweeps))}` first"
        )
    return rows, missing


def read_once(index: Index, runs: list[dict[str, Any]]) -> Any:
    """The index with the rows of these runs' cells and anchors read once for the whole report
    (assess.report.reads: a few queries per report, not several per cell)."""
    from assess.report.reads import ReportIndex

    return ReportIndex(index, {r["cell_key"] for r in runs} | {r["anchor_cell_key"] for r in runs if r["anchor_cell_key"]})


def _status(runs: list[dict[str, Any]]) -> str:
    return cell_status(r["status"] for r in runs)


def _is_prompts(override: str) -> bool:
    key = (parse_override(override) or ("", ""))[0]
    return key == "prompts" or key.startswith("prompts.")


def render_line(overrides: list[str], prompts: list[str], keys: set[tuple[str, int]]) -> str:
    """`python -m render ...` that renders these samples of the cell: its overrides (seed aside), the prompt
    overrides of the run that asked for them (prompts=<name>, prompts.limit=...), and the seeds."""
    kept = [o for o in overrides if (parse_override(o) or ("", ""))[0] != "seed" and not _is_prompts(o)]
    seeds = sorted({seed for _, seed in keys})
    seed = str(seeds[0]) if len(seeds) == 1 else f"[{','.join(map(str, seeds))}]"
    words = ["python", "-m", "render", *kept, *prompts, *([f"seed={seed}"] if seeds else [])]
    return " ".join(shlex.quote(w) for w in words)


def _prompt_overrides(run: dict[str, Any]) -> list[str]:
    """The run's prompt overrides, with prompts=<name> first when the run did not choose its prompts by override."""
    own = [o for o in json.loads(run["overrides"] or "[]") if _is_prompts(o)]
    named = any((parse_override(o) or ("", ""))[0] == "prompts" for o in own)
    return own if named else [f"prompts={run['prompts_name']}", *own]


def _without_seed(overrides: list[str]) -> list[str]:
    """A union's row covers the seeds of all its runs: its label names none (its render line lists them)."""
    return [o for o in overrides if (parse_override(o) or ("", ""))[0] != "seed"]


def _cell_views(index: Index, runs: list[dict[str, Any]]) -> tuple[list[CellView], Scope]:
    """The scope's cells (assess.statistics.scope): numbers over the pairs the runs asked for, and their anchors on the same."""
    scope = scope_of(runs)
    prompts = {(r["anchor_cell_key"], r["split"]): _prompt_overrides(r) for r in runs}
    prompts |= {(r["cell_key"], r["split"]): _prompt_overrides(r) for r in runs}
    views = []
    memo: dict[Any, Any] = {}  # the anchors' side of every comparison, read once (assess.statistics.compare.compare_cell)
    for (cell_key, split), cell in sorted(scope.cells.items()):
        row = index.cell_row(cell_key, split)
        if row is None:
            continue  # an anchor that is not indexed (yet)
        scoped = scoped_cell(index, cell)
        overrides = cell.overrides or json.loads(row["overrides"] or "[]")
        view = CellView(
            cell_key=cell_key, split=split, anchor_cell_key=cell.anchor_cell_key, is_anchor=cell.is_anchor,
            status=_status(cell.runs) if cell.runs else row["status"], n_samples=len(scoped.samples),
            n_expected=cell.n_expected, overrides=overrides, values=scoped.values, reasons=scoped.reasons,
            label=_label(_without_seed(overrides) if scope.is_union else overrides, cell_key, cell.is_anchor),
            n_values=row["height"] * row["width"] * 3 if row["height"] and row["width"] else None,
            keys=cell.keys, reused=scoped.reused_elsewhere, groups=sorted(cell.groups),
            command=render_line(overrides, prompts.get((cell_key, split), []), cell.keys), sizes=scoped.sizes,
            noisy=scoped.noisy, stages=cell_stages(scoped.samples),
        )
        if not view.is_anchor:
            anchor = scope.cells.get((cell.anchor_cell_key, split))
            view.comparison = compare_cell(index, cell_key, view.anchor_cell_key, split, cell.keys,
                                           anchor.keys if anchor else None, memo)
        views.append(view)
    views.sort(key=_rank)
    views = order_same_work(index, views)
    anchors = [v for v in views if v.is_anchor]
    for i, v in enumerate(anchors):
        v.mark = "A" if len(anchors) == 1 else f"A{i + 1}"
    for i, v in enumerate(v for v in views if not v.is_anchor):
        v.mark = str(i + 1)
    return views, scope


def _rank(view: CellView) -> tuple[Any, ...]:
    """Anchors first, then the cells timed side by side with their anchor by speed-up, then the cells timed apart
    (by their render-time figure, which does not rank them against the others: their column says so)."""
    from assess.verdicts.table import speed_rank

    comparison = view.comparison
    speed = comparison.speedup.value if comparison and comparison.speedup else None
    return (view.split, not view.is_anchor, *speed_rank(comparison.timed if comparison else None, speed), view.label)


def order_same_work(index: Index, views: list[CellView]) -> list[CellView]:
    """Cells that did the same work (byte-identical images on every shared sample) are each listed, by their own
    overrides: the later one names the first (`same_work_as`) and follows it directly, never ranked apart from it."""
    from assess.statistics.side_by_side import same_work

    by_split: dict[str, list[CellView]] = {}
    for v in views:
        by_split.setdefault(v.split, []).append(v)
    first_of: dict[int, CellView] = {}  # id(a later cell) -> the first cell doing its work
    for split, group in by_split.items():
        keep = {v.cell_key: v for v in group}
        for key, first_key in same_work(index, [v.cell_key for v in group], split).items():
            keep[key].same_work_as = first_key
            first_of[id(keep[key])] = keep[first_key]
    ordered = [v for v in views if id(v) not in first_of]
    for twin in (v for v in views if id(v) in first_of):  # in rank order
        first = first_of[id(twin)]
        while id(first) in first_of:
            first = first_of[id(first)]
        at = next(i for i, v in enumerate(ordered) if v is first) + 1
        while at < len(ordered) and ordered[at].same_work_as is not None:  # after the twins already placed
            at += 1
        ordered.insert(at, twin)
    return ordered


def same_work_text(view: CellView, label_of: dict[tuple[str, str], str]) -> str:
    """`(same work as <the first cell's overrides>)`, or '' for a cell that reproduces no other."""
    if view.same_work_as is None:
        return ""
    return f" (same work as {label_of.get((view.same_work_as, view.split), view.same_work_as[:12])}: byte-identical " \
           "images, one result)"


# -- leaderboard ----------------------------------------------------------------------------

SPEEDUP = "speedup"  # not a stored metric: the anchor's median warm latency / the cell's, with its interval
STAGES = "stages"  # not a stored metric: the cell's time split, text · denoise · VAE (assess.statistics.time_split)


def leaderboard_columns() -> list[tuple[str, str]]:
    """(metric, title) of the leaderboard's metric columns, from the registry; speed-up after median latency."""
    columns = []
    for spec in leaderboard_specs():
        delta = spec.level == "sample" and not spec.needs_reference
        columns.append((spec.name, f"{spec.title} (Δ vs anchor)" if delta else spec.title))
        if spec.name == "latency_median_s":
            columns.append((SPEEDUP, "speed-up vs anchor"))
            columns.append((STAGES, "time split (text · denoise · VAE)"))
    return columns


def _metric_cell(view: CellView, metric: str) -> dict[str, str]:
    """Text, tooltip and css class of one leaderboard cell."""
    comparison = view.comparison
    if metric == SPEEDUP:
        if view.is_anchor:
            return {"text": "1 (anchor)", "title": "", "cls": "anchor"}
        if comparison is None or comparison.speedup is None:
            return {"text": "n/a", "title": "no warm latency for this cell or its anchor", "cls": "na"}
        timed = f" · {comparison.timed}" if comparison.timed else ""
        if view.noisy and comparison.timed != SIDE_BY_SIDE:  # the interval is there; the flag says why not to rank
            # on it (side by side, the render's noise is not in the figure)
            return {"text": _interval_text(comparison.speedup) + f"× ⚠ noisy{timed}", "title": view.noisy,
                    "cls": "noisy"}
        return {"text": _interval_text(comparison.speedup) + f"×{timed}", "title": comparison.speedup.note or "",
                "cls": "" if comparison.timed == SIDE_BY_SIDE else "apart"}
    if metric == STAGES:
        return {"text": stage_text(view.stages), "title": view.stages.seconds() if view.stages else
                "no stage split: its samples were recorded before the renderer recorded one", "cls": ""}
    spec = SPECS[metric]
    value = view.values.get(metric)
    if value is None:
        reason = view.reasons.get(metric, "not scored")
        if spec.needs_reference and view.is_anchor:
            return {"text": "reference", "title": "the anchor is the reference", "cls": "anchor"}
        return {"text": "n/a", "title": reason, "cls": "na"}
    if spec.display == "bytes":
        return {"text": _bytes(value), "title": "", "cls": ""}
    if metric == SPEED_NOISE.name:
        return {"text": f"{value:.0%}" + (" ⚠ noisy" if view.noisy else ""), "title": view.noisy or "",
                "cls": "noisy" if view.noisy else ""}
    if spec.is_set:
        n = view.sizes.get(metric)
        return {"text": f"{_fmt(value)} (n={n})", "title": f"over {n} samples paired with the anchor's (the split)",
                "cls": ""}
    estimate = comparison.metrics.get(metric) if comparison else None
    if estimate is None:
        return {"text": _fmt(value), "title": "", "cls": ""}
    if comparison and comparison.kinds.get(metric) == "delta":
        p = f" p={estimate.p_value:.2g}" if estimate.p_value is not None else ""
        return {"text": f"{_fmt(value)} (Δ {_interval_text(estimate, signed=True)}{p})",
                "title": estimate.note or "", "cls": ""}
    return {"text": _interval_text(estimate), "title": estimate.note or "", "cls": ""}


def shown_columns(views: list[CellView]) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The leaderboard's columns that some row has a value in; the others, each with why it has none."""
    shown, hidden = [], {}
    for metric, title in leaderboard_columns():
        if metric in (SPEEDUP, STAGES) or any(v.values.get(metric) is not None for v in views):
            shown.append((metric, title))
        else:
            reasons = [v.reasons[metric] for v in views if metric in v.reasons and not v.is_anchor]
            if reasons:
                hidden[metric] = max(set(reasons), key=reasons.count)
    return shown, hidden


def _samples_text(v: CellView) -> dict[str, str]:
    text = f"{v.n_samples}/{v.n_expected}"
    if not v.reused:
        return {"text": text, "title": ""}
    return {"text": f"{text} ({v.reused} reused†)",
            "title": f"{v.reused} of these samples were rendered by a run outside this report's sweep(s) and reused; "
                     "their latency is the one measured when they were rendered"}


def leaderboard_rows(views: list[CellView], columns: list[tuple[str, str]]) -> list[dict[str, Any]]:
    label_of = {(v.cell_key, v.split): v.label for v in views}
    return [
        {
            "label": v.label + same_work_text(v, label_of), "mark": v.mark, "cell_key": v.cell_key, "split": v.split, "is_anchor": v.is_anchor,
            "status": v.status, "samples": _samples_text(v), "n_samples": v.n_samples, "n_expected": v.n_expected,
            "command": v.command, "groups": v.groups,
            "metrics": [_metric_cell(v, m) for m, _ in columns],
        }
        for v in views
    ]


# -- Pareto plot ----------------------------------------------------------------------------


def _quality(view: CellView, metric: str) -> float | None:
    from assess.metrics.fidelity import PSNR, psnr_identical

    spec = SPECS[metric]
    if view.is_anchor and spec.needs_reference:
        if spec.identity is not None:
            return spec.identity
        if metric == PSNR.name:  # identical images: a ceiling that depends on the image size
            return psnr_identical(view.n_values) if view.n_values else None
        return None
    return view.values.get(metric)


def interval_bars(view: CellView, metric: str, x: float, y: float) -> tuple[Any, Any]:
    """(x error, y error) of a point as matplotlib takes them ([[below], [above]]), None where there is no interval:
    the latency's from the speed-up's interval (latency = the anchor's / speed-up), the quality's from its own."""
    comparison = view.comparison
    if comparison is None:
        return None, None
    xerr = yerr = None
    speed = comparison.speedup
    if speed is not None and speed.low and speed.high:
        xerr = [[max(0.0, x - x * speed.value / speed.high)], [max(0.0, x * speed.value / speed.low - x)]]
    quality = comparison.metrics.get(metric)
    if quality is not None and quality.low is not None and quality.high is not None:
        shift = y - quality.value if comparison.kinds.get(metric) == "delta" else 0.0  # a delta's interval, at the value
        yerr = [[max(0.0, y - (quality.low + shift))], [max(0.0, quality.high + shift - y)]]
    return xerr, yerr


LABEL_OFFSETS = [(6, 4), (6, -14), (-18, 4), (-18, -14), (6, 16), (6, -26), (-18, 16), (-18, -26)]  # points
MAX_LABELLED = 200  # points the plot marks each; above it, the frontier's and the anchors' alone (the table has all)


def pareto_figure(views: list[CellView], metric: str) -> tuple[Any, list[dict[str, str]]]:
    """The plot (a matplotlib Figure, or why it cannot be drawn) with each point marked by its row's short mark
    (A, 1, 2, ...; the legend maps marks to cells), labels placed so that none overlaps another; above MAX_LABELLED
    points, only the Pareto frontier's and the anchors' are marked."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    spec = SPECS[metric]
    pts: list[tuple[CellView, float, float]] = []
    for v in views:
        x, y = v.values.get(speed_axis.METRIC), _quality(v, metric)
        if x is not None and y is not None:
            pts.append((v, x, y))
    if not pts:
        return f"no cell has both a warm latency and {metric}", []
    fig = Figure(figsize=(8, 5.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for anchor, marker, size, colour in ((True, "*", 220, "tab:red"), (False, "o", 50, "tab:blue")):
        mine = [(x, y) for view, x, y in pts if view.is_anchor == anchor]  # one call per kind: 5,000 cells are one
        if mine:
            ax.scatter([x for x, _ in mine], [y for _, y in mine], marker=marker, s=size, c=colour, zorder=3)
    bars: dict[tuple[bool, bool], list[tuple[float, float, Any, Any]]] = defaultdict(list)
    for view, x, y in pts:
        xerr, yerr = interval_bars(view, metric, x, y)
        if xerr is not None or yerr is not None:
            bars[(xerr is not None, yerr is not None)].append((x, y, xerr, yerr))
    for (has_x, has_y), group in bars.items():  # one errorbar call per kind of interval
        ax.errorbar([g[0] for g in group], [g[1] for g in group],
                    xerr=[[g[2][0][0] for g in group], [g[2][1][0] for g in group]] if has_x else None,
                    yerr=[[g[3][0][0] for g in group], [g[3][1][0] for g in group]] if has_y else None,
                    fmt="none", ecolor="tab:blue", alpha=0.5, elinewidth=1, capsize=2, zorder=2)
    front = speed_axis.frontier([(x, y) for _, x, y in pts], spec.direction == "higher")
    ax.step([pts[i][1] for i in front], [pts[i][2] for i in front], where="post", color="tab:green", lw=1.5,
            label="Pareto frontier", zorder=2)
    ax.scatter([], [], marker="*", s=120, c="tab:red", label="anchor")
    ax.set_xlabel(speed_axis.LABEL)
    ax.set_ylabel(f"{metric} ({spec.direction} is better)")
    ax.set_title(f"speed vs {metric}")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    if len(pts) > MAX_LABELLED:  # thousands of cells: their labels would hide the plot; the frontier and anchors
        shown = set(front) | {i for i, (v, _, _) in enumerate(pts) if v.is_anchor}
        ax.set_title(f"speed vs {metric}: {len(pts)} cells, the Pareto frontier's and the anchors' marked")
    else:
        shown = set(range(len(pts)))
    fig.tight_layout()
    place_labels(ax, [(v.mark, x, y) for i, (v, x, y) in enumerate(pts) if i in shown])
    label_of = {(v.cell_key, v.split): v.label for v in views}
    return fig, [{"mark": v.mark, "label": v.label + same_work_text(v, label_of), "cell_key": v.cell_key}
                 for v, _, _ in pts]


def place_labels(ax: Any, marks: list[tuple[str, float, float]]) -> None:
    """Annotate the points with their marks, each label at the first offset where it overlaps no other label;
    a label that finds no free offset joins the nearest point's ("2,5") (assess.report.labels)."""
    from assess.report.labels import place

    place(ax, marks, LABEL_OFFSETS, {"fontsize": 9, "weight": "bold"})


def pareto_plot(views: list[CellView], metric: str, path: Path) -> tuple[str | None, list[dict[str, str]]]:
    """Write the plot; returns why it could not be drawn (or None), and the legend (mark -> cell)."""
    fig, legend = pareto_figure(views, metric)
    if isinstance(fig, str):
        return fig, []
    fig.savefig(path)
    return None, legend


# -- contact sheets -------------------------------------------------------------------------


def swept_axes(views: list[CellView]) -> list[str]:
    """Override keys whose value differs between the (non-anchor) cells."""
    cells = [v for v in views if not v.is_anchor]
    keys = sorted({k for v in cells for k in v.axes})
    return [k for k in keys if len({v.axes.get(k) for v in cells}) > 1]


def _one_factor_group(views: list[CellView], axis: str, axes: list[str]) -> list[CellView]:
    """Cells that set `axis` and agree on every other axis: the group with most values of `axis`."""
    groups: dict[tuple[Any, ...], list[CellView]] = defaultdict(list)
    for v in views:
        if not v.is_anchor and axis in v.axes:
            groups[tuple(v.axes.get(a) for a in axes if a != axis)].append(v)
    best = max(groups.values(), key=lambda g: (len({v.axes.get(axis) for v in g}), -len(g)))
    return sorted(best, key=lambda v: _natural(v.axes.get(axis)))


def _natural(value: str | None) -> tuple[int, float, str]:
    try:
        return (0, float(value), "") if value is not None else (2, 0.0, "")
    except ValueError:
        return (1, 0.0, str(value))


def contact_sheets(index: Index, views: list[CellView], out: Path) -> list[Sheet]:
    axes = swept_axes(views)
    by_key = {(v.cell_key, v.split): v for v in views}
    sheets_spec: list[tuple[str, list[CellView]]] = []
    for axis in axes:
        sheets_spec.append((axis, _one_factor_group(views, axis, axes)))
    if not axes:
        sheets_spec.append(("cells", [v for v in views if not v.is_anchor]))
    sheets = []
    for axis, cells in sheets_spec:
        split = cells[0].split if cells else (views[0].split if views else "")
        anchors = {c.anchor_cell_key for c in cells} or {v.cell_key for v in views if v.is_anchor}
        columns_views = [by_key[(a, split)] for a in sorted(anchors) if (a, split) in by_key] + cells
        sheets.append(_sheet(index, axis, columns_views, out))
    return sheets


def _sheet(index: Index, axis: str, columns: list[CellView], out: Path) -> Sheet:
    sheet = Sheet(axis=axis, columns=[
        {"label": v.label, "cell_key": v.cell_key, "is_anchor": v.is_anchor,
         "value": "anchor" if v.is_anchor else f"{axis}={v.axes[axis]}" if axis in v.axes else v.label}
        for v in columns])
    samples = {
        v.cell_key: {(r["prompt_sha"], r["seed"]): r for r in index.samples_of(v.cell_key, v.split)
                     if (r["prompt_sha"], r["seed"]) in v.keys}
        for v in columns
    }
    asked = set().union(*(v.keys for v in columns if not v.is_anchor)) or set().union(*(v.keys for v in columns))
    keys = sorted(asked, key=lambda k: (k[1], k[0]))
    first_seed = min((k[1] for k in keys), default=0)
    chosen = [k for k in keys if k[1] == first_seed][:MAX_PROMPTS]
    for text_id, seed in chosen:
        images = []
        prompt = prompt_id = None
        for v in columns:
            row = samples[v.cell_key].get((text_id, seed))
            prompt = prompt or (row["prompt"] if row else None)
            prompt_id = prompt_id or (row["prompt_id"] if row else None)
            images.append(_copy_image(row, v.cell_key, out))
        sheet.rows.append({"prompt_id": prompt_id or text_id, "prompt": prompt or "", "seed": seed, "images": images})
    return sheet


def _copy_image(row: Any, cell_key: str, out: Path) -> dict[str, Any]:
    """The sample's file put under `out` (`_place`; a clip's APNG plays in the <img>), and a clip's strip of frames."""
    if row is None:
        return {"src": None, "note": "not rendered"}
    if row["problem"]:
        return {"src": None, "note": row["problem"]}
    suffix = Path(str(row["image"])).suffix
    name = f"{row['prompt_id']}__{str(row['prompt_sha'])[:8]}__s{row['seed']}{suffix if suffix == '.png' else ''}"
    rel = Path("images") / safe_component(cell_key) / safe_component(name)  # recorded data made safe as names
    target = out / rel
    try:
        source = contained(row["run_path"], row["image"], "image")  # never a file outside its run folder
        target.parent.mkdir(parents=True, exist_ok=True)
        _place(source, target)
        strip = _strip(target, row["frames"], row["fps"], rel) if row["frames"] else []
    except OSError as exc:
        return {"src": None, "note": f"image not readable: {exc}"}
    return {"src": rel.as_posix(), "note": None, "strip": strip}


def _place(source: Path, target: Path) -> None:
    """`target` as a hard link to `source` (a contact sheet of 5,000 cells puts thousands of images: no bytes are
    copied), a copy where no link can be made (another filesystem, a filesystem without links, a file the user may
    not link). Safe because a run's image is never written in place (render.rundir.atomic_write_bytes replaces it),
    so the report keeps the bytes it showed. A `target` there already is removed first, never written through: it
    may be a link to another image."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _strip(clip: Path, frames: int, fps: int, rel: Path) -> list[dict[str, Any]]:
    """A clip's frame strip (render.run.apng.strip_indices), each frame a PNG beside the clip; frames are streamed."""
    from PIL import Image

    from render.run.apng import CHUNK, iter_frames, strip_indices

    wanted, shown, start = set(strip_indices(frames)), [], 0
    for chunk in iter_frames(clip, frames, fps, CHUNK):
        for i in sorted(w for w in wanted if start <= w < start + len(chunk)):
            frame = rel.with_name(f"{rel.stem}__f{i}.png")
            Image.fromarray(chunk[i - start]).save(clip.parent / frame.name)
            shown.append({"src": frame.as_posix(), "frame": i + 1})
        start += len(chunk)
    return shown


def cell_sheet(index: Index, columns: list[CellView], out: Path) -> Sheet:
    """One contact sheet of these cells (prompts x cells, as the report picks them), its images put under `out`."""
    return _sheet(index, "cells", columns, out)


# -- failures -------------------------------------------------------------------------------


def failure_rows(runs: list[dict[str, Any]], out: Path, unchanged: set[str] | frozenset[str] = frozenset()
                 ) -> list[dict[str, Any]]:
    """The failed runs, and the runs that failed or crashed since they were indexed: each run not indexed as failed
    is read again, but a finished one whose folder is as it was indexed (`unchanged`: Index.unchanged_runs)."""
    from assess.status import run_status

    now = datetime.now(timezone.utc)
    rows = []
    for run in sorted(runs, key=lambda r: r["path"]):
        if run["status"] == CellState.DONE and run["path"] in unchanged:
            continue  # finished as the index has it: one terminal record, and its folder unchanged since
        if run["status"] == CellState.FAILED:
            record = Path(run["failed_record"])
            try:
                traceback = json.loads(record.read_text()).get("traceback", "")
            except (OSError, ValueError):
                traceback = ""
            rows.append({"cell": Path(run["path"]).name, "cell_key": run["cell_key"], "state": CellState.FAILED.value,
                         "category": run["category"], "message": run["message"] or "",
                         "record": href(os.path.relpath(record, out)), "record_abs": str(record), "traceback": traceback})
        elif Path(run["path"]).is_dir():
            try:
                current = run_status(load_run(run["path"]), now)  # the index may predate the failure
            except (RunDirError, OSError, ValueError) as exc:  # named in the report; the other runs go on
                rows.append({"cell": Path(run["path"]).name, "cell_key": run["cell_key"], "state": CellState.UNREADABLE,
                             "category": "unreadable", "message": f"{type(exc).__name__}: {exc}",
                             "record": href(os.path.relpath(run["path"], out)), "record_abs": run["path"], "traceback": ""})
                continue
            if current.state in (CellState.FAILED, CellState.CRASHED):
                record = Path(run["path"]) / (FAILED if current.state == CellState.FAILED else LOG)
                rows.append({"cell": Path(run["path"]).name, "cell_key": run["cell_key"], "state": current.state,
                             "category": current.category or current.state, "message": current.detail,
                             "record": href(os.path.relpath(record, out)), "record_abs": str(record), "traceback": ""})
    return rows


# -- the report -----------------------------------------------------------------------------


def _quality_metric(views: list[CellView], requested: str | None, parity: dict[str, Any] | None = None) -> str:
    """--quality-metric, else the model's own (model.parity.metric) when its cells have it, else the first quality
    metric they have (assess.verdicts.default_rule)."""
    from assess.verdicts.default_rule import choose_metric

    valid = quality_metric_names()
    if requested and requested not in valid:
        from assess.errors import UnknownMetric

        raise UnknownMetric(f"unknown quality metric {requested!r}. Valid: {', '.join(valid)}")
    has = [m for m in valid if any(v.values.get(m) is not None for v in views if not v.is_anchor)]
    return choose_metric(requested, parity or {}, has, valid)


def verdict_rule(index: Index, views: list[CellView], metric: str, band: float | None, alpha: float, test: str,
                 price: float | None, model: str = "", parity: dict[str, Any] | None = None) -> Rule:
    """The sweep report's parity rule: its metric, its band (--band, else a default with its source:
    assess.verdicts.default_rule) and test, and the floors measured for its model."""
    from assess.verdicts.default_rule import choose_band
    from assess.statistics.floor import floors_of

    floors = floors_of(index, views)
    chosen, source = choose_band(metric, band, floors, model, parity or {})
    return Rule(metric, chosen, alpha, test, SPECS[metric].direction == "higher", price, floors, band_source=source)


def default_rule(index: Index, views: list[CellView], runs: list[dict[str, Any]], quality_metric: str | None,
                 band: float | None, alpha: float = 0.05, test: str = "noninferiority",
                 price: float | None = None) -> Rule:
    """The rule a sweep's cells are judged by with what was given (None: the defaults of assess.verdicts.default_rule)."""
    from assess.verdicts.default_rule import model_parity

    model, parity = model_parity([r["path"] for r in runs if not r.get("is_anchor")])
    metric = _quality_metric(views, quality_metric, parity)
    return verdict_rule(index, views, metric, band, alpha, test, price, model, parity)


def _render_html(context: dict[str, Any]) -> str:
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(loader=PackageLoader("assess", "templates"), autoescape=select_autoescape(["html", "j2"]),
                      finalize=finalize)  # every printed value escaped, and its credentials redacted
    env.filters["one_line"] = one_line
    return env.get_template("report.html.j2").render(**context)


def one_line(text: str, width: int = 140) -> str:
    """A reason on one line: its first line, cut at `width` characters (the whole text is the line's tooltip); its
    credentials redacted before the cut, which could leave a URL's password without the @ that marks it."""
    text = redact(str(text)).strip()
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= width else first[: width - 1].rstrip() + "…"


def default_out(sweeps: list[Path]) -> Path:
    return sweeps[0] / "report"


def category_sections(index: Index, views: list[CellView], metric: str, band: float | None, alpha: float,
                      out: Path) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]]]:
    """(per-category rows, the categories, the "where it breaks" rows) of the report's cells on `metric`."""
    by_key = {(v.cell_key, v.split): v for v in views}
    rows: list[dict[str, Any]] = []
    breaks: list[dict[str, Any]] = []
    for v in views:
        if v.is_anchor:
            continue
        anchor = by_key.get((v.anchor_cell_key, v.split))
        answers = cell_categories(index, v.cell_key, v.anchor_cell_key, v.split, metric, v.label, band, alpha,
                                  keys=v.keys, anchor_keys=anchor.keys if anchor else None)
        rows.append({"mark": v.mark, "label": v.label, "cell_key": v.cell_key, "answers": answers,
                     "by_category": {a.category: a for a in answers.answers}})
        worst = worst_prompts(index, answers, v.anchor_cell_key, v.split, lambda row, key: _copy_image(row, key, out),
                              keys=v.keys)
        if worst:
            breaks.append({"mark": v.mark, "label": v.label, "cell_key": v.cell_key, "prompts": worst})
    names = sorted({a.category for r in rows for a in r["answers"].answers})
    return rows, names, breaks


def speed_notes(index: Index, views: list[CellView]) -> list[dict[str, Any]]:
    """One row per cache cell (its engagement), per compiled cell (its compile time and break-even) and per parallel
    cell (its parity against one GPU, assess.statistics.parity: `parallel-drift` is a warning); a cache that never
    engaged says why its cell did the same work as another."""
    from assess.statistics.parity import floor_beside, parity_note
    from assess.report.speed_notes import NEVER_ENGAGED, compile_costs, engagement_note

    costs = compile_costs(index)
    out = []
    stages = {(v.cell_key, v.split): v.stages for v in views}
    for v in views:
        found = index.runs_of(v.cell_key)[:1]
        samples = index.samples_of(v.cell_key, v.split)
        notes = [engagement_note(json.loads(found[0]["cell"]), samples) if found else None]
        cost = costs.get((v.cell_key, v.split))
        notes.append(None if cost is None else cost.note())
        notes.append(parity_note(index.parity(v.cell_key), floor_beside(index, v.cell_key)))  # against its width-1 twin
        if not v.is_anchor:  # the speed-up its denoiser lever cannot give: another stage dominates (assess.statistics.time_split)
            anchor = stages.get((v.anchor_cell_key, v.split)) or cell_stages(index.samples_of(v.anchor_cell_key, v.split))
            notes.append(bound_note(anchor, v.stages))
        out += [{"mark": v.mark, "label": v.label, "cell_key": v.cell_key, "note": n,
                 "warn": NEVER_ENGAGED in n or "never pays" in n or n.startswith("parallel-drift") or BOUND in n}
                for n in notes if n]
    return out


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off inside (reference counting still frees what is dropped), as it was after.

    A report of 5,000 cells holds every cell's index rows (100,000 samples and as many scores, read at once:
    assess.report.reads), views and statistics until it ends: millions of dicts, lists and floats, none of them in a
    reference cycle, all freed by their reference counts. The collector cannot know that: each time enough objects
    have been allocated it walks them all again, 14 full collections and about 2 s of a 12 s report. Paused, it walks
    none of them; the few cycles a report does make (matplotlib's figure) wait until it runs again, after.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def write_report(sweeps: list[Path | str], index_path: Path | str | None = None, out: Path | str | None = None,
                 quality_metric: str | None = None, problems: list[str] | None = None, band: float | None = None,
                 alpha: float = 0.05, notes: list[str] | None = None, test: str = "noninferiority",
                 price_per_gpu_hour: float | None = None) -> Path:
    """Write the report folder and return the path of its index.html. `problems`, when given, receives
    "<run>: <problem>" for each run directory the report could not read (it is listed in the report too). With a
    band (in the quality metric's units), each cell's parity is decided and a cell at parity that breaks on a
    category is flagged. `notes`, when given, receives the cache engagement and compile break-even lines."""
    sweep_paths = [Path(s).resolve() for s in sweeps]
    out_dir = Path(out).resolve() if out else default_out(sweep_paths)
    check_out(out_dir)  # before anything is read or written: a folder that is not ours is never replaced
    with collector_paused(), Index.open(index_path, create=False) as index, remembering(index.path), \
            staged(out_dir) as staging:
        runs, missing = _runs_in_index(index, sweep_paths)
        index = read_once(index, runs)
        views, scope = _cell_views(index, runs)
        rule = default_rule(index, views, runs, quality_metric, band, alpha, test, price_per_gpu_hour)
        verdict = sweep_verdict(index, views, rule, recorded_verdicts([r["path"] for r in runs]), band)
        verdict["answer"] = answer_of(verdict, runs, sweep_paths)
        verdict["winner"] = winner_section(staging, verdict, runs, sweep_paths, rule)
        _write_report(index, staging, out_dir, sweep_paths, runs, missing, views, scope, rule.metric, rule.band, alpha,
                      problems, notes, verdict)
    return out_dir / "index.html"


def winner_section(staging: Path, verdict: dict[str, Any], runs: list[dict[str, Any]], sweeps: list[Path],
                   rule: Any) -> dict[str, Any] | None:
    """The sweep's fastest cell at parity written as winner.yaml into the report folder (assess.winner), and what the
    report shows of it: its overrides and the copy-paste Python, which names the file beside the report (a report's
    bytes depend on its evidence only, not on the folder it is written to: an export writes it elsewhere, and a
    second export must find it unchanged); None without a cell at parity."""
    from assess.verdicts.answer import fastest_at_parity
    from assess.winner.contract import WINNER, write_winner
    from assess.winner.judged import python_snippet, sweep_winner
    from render.errors import RenderError

    best = fastest_at_parity(verdict)
    if best is None:
        return None
    try:
        winner = sweep_winner(verdict, best, runs, sweeps, rule.alpha, rule.floors.get(rule.metric))
    except (ValueError, RenderError) as error:  # its overrides no longer compose to the judged cell: no file, and why
        return {"problem": f"no winner file: {error}"}
    write_winner(staging / WINNER, winner)
    return {"file": WINNER, "overrides": winner.override_line, "python": python_snippet(WINNER)}


def _write_report(index: Index, staging: Path, out_dir: Path, sweep_paths: list[Path], runs: list[dict[str, Any]],
                  missing: list[str], views: list[CellView], scope: Scope, metric: str, band: float | None,
                  alpha: float, problems: list[str] | None, notes: list[str] | None, verdict: dict[str, Any]) -> None:
    """The report's contents, written into `staging` (assess.report.outdir.staged puts it in out_dir's place)."""
    sheets = contact_sheets(index, views, staging)
    category_rows, category_names, breaks = category_sections(index, views, metric, band, alpha, staging)
    from assess.report.throughput import throughput_rows

    notes_rows = speed_notes(index, views)
    if notes is not None:
        notes += [f"{n['mark']} {n['label']}: {n['note']}" for n in notes_rows]
    pareto_problem, legend = pareto_plot(views, metric, staging / "pareto.png")
    failures = failure_rows(runs, out_dir, index.unchanged_runs([r["path"] for r in runs]))
    if problems is not None:
        problems += [f"{f['record_abs']}: {f['message']}" for f in failures if f["state"] == "unreadable"]
    columns, hidden = shown_columns(views)
    context = {
        "title": "hypergrid report: " + ", ".join(p.name for p in sweep_paths),
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "sweeps": [str(p) for p in sweep_paths],
        "index_path": str(Path(index.path).resolve()),
        "union": scope.groups if scope.is_union else [],
        "columns": [title for _, title in columns],
        "hidden_columns": hidden,
        "leaderboard": leaderboard_rows(views, columns),
        "any_reused": any(v.reused for v in views),
        "quality_metric": metric,
        "pareto": None if pareto_problem else "pareto.png",
        "pareto_problem": pareto_problem,
        "pareto_legend": legend,
        "sheets": sheets,
        "band": band,
        "category_rows": category_rows,
        "category_names": category_names,
        "category_warnings": [r["answers"].warning for r in category_rows if r["answers"].warning],
        "breaks": breaks,
        "failures": failures,
        "missing": missing,
        "speed_notes": notes_rows,
        "throughput": throughput_rows(index, views),
        "verdict": verdict,
    }
    (staging / "index.html").write_text(_render_html(context), encoding="utf-8")


def answer_of(verdict: dict[str, Any], runs: list[dict[str, Any]], sweeps: Sequence[Path]) -> Answer:
    """The verdict table's one sentence (assess.verdicts.answer), its next command for the prompts the cells rendered."""
    from assess.verdicts.answer import sentence

    prompts = next((str(r["prompts_name"]) for r in runs if not r["is_anchor"]), "smoke")
    return sentence(verdict, prompts, " ".join(str(s) for s in sweeps))


def sweep_table(sweeps: Sequence[Path | str], index_path: Path | str | None = None) -> dict[str, Any] | None:
    """The verdict table a sweep's report opens with under the default rule (assess.verdicts.default_rule), its `answer`
    included; None when none of its runs is indexed."""
    paths = [Path(s).resolve() for s in sweeps]
    with Index.open(index_path, create=False) as index:
        runs, _ = _runs_in_index(index, paths)
        if not runs:
            return None
        index = read_once(index, runs)
        views, _ = _cell_views(index, runs)
        rule = default_rule(index, views, runs, None, None)
        verdict = sweep_verdict(index, views, rule, recorded_verdicts([r["path"] for r in runs]))
        verdict["answer"] = answer_of(verdict, runs, paths)
        return verdict


def sweep_answer(sweeps: Sequence[Path | str], index_path: Path | str | None = None) -> Answer | None:
    """The sentence a sweep's report opens with (sweep_table)."""
    table = sweep_table(sweeps, index_path)
    return None if table is None else table["answer"]


def sweep_cells(index: Index, sweeps: list[Path | str]) -> tuple[list[CellView], list[dict[str, Any]]]:
    """The report's cells of these sweeps, in leaderboard order (what `write_report` shows), and their `runs` rows."""
    runs, _ = _runs_in_index(index, [Path(s).resolve() for s in sweeps])
    views, _ = _cell_views(read_once(index, runs), runs)
    return views, runs
