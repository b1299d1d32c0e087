"""The report's answers per category and its "where it breaks" sheet, from the index.

For each cell against its anchor, on one quality metric: the paired per-prompt deltas (assess.statistics.compare.
quality_deltas) grouped by the prompts' categories (assess.statistics.categories). With a band, each cell's overall
parity (TOST) is decided too, and a cell at parity that breaks on a category is flagged. The sheet shows
each cell's worst prompts on that metric beside the anchor's images.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from assess.statistics.categories import MIN_PROMPTS, CategoryAnswer, category_answers, warning
from assess.metrics import SPECS
from assess.statistics.compare import Estimate, ParityTest, mean_interval, parity_decision, quality_deltas

WORST = 4  # prompts per cell on the "where it breaks" sheet
CopyImage = Callable[[Any, str], dict[str, Any]]


@dataclass
class CellCategories:
    cell_key: str
    label: str
    metric: str
    overall: Estimate | None
    verdict: str | None  # parity | out | undecided | no-data, when a band was given
    band: float | None
    answers: tuple[CategoryAnswer, ...] = ()
    warning: str | None = None
    deltas: dict[str, float] = field(default_factory=dict)  # prompt text identity -> its delta

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "band": self.band, "verdict": self.verdict, "warning": self.warning,
                "overall": self.overall.as_dict() if self.overall else None,
                "categories": [a.as_dict() if self.band is not None else
                               {k: v for k, v in a.as_dict().items() if k not in ("out_p", "out_of_band", "breaks", "band")}
                               for a in self.answers]}


def prompt_categories(index: Any, cell_key: str, split: str) -> dict[str, str | None]:
    """prompt text identity -> its category, for a cell's samples of a split (what quality_deltas is keyed by)."""
    out: dict[str, str | None] = {}
    seen: set[tuple[str, str | None]] = set()
    for r in index.samples_of(cell_key, split):  # each (prompt, category) once, as SELECT DISTINCT gave them
        if (r["prompt_sha"], r["category"]) not in seen:
            seen.add((r["prompt_sha"], r["category"]))
            out[r["prompt_sha"]] = r["category"]
    return out


def cell_categories(index: Any, cell_key: str, anchor_cell_key: str, split: str, metric: str, label: str,
                    band: float | None = None, alpha: float = 0.05, min_prompts: int = MIN_PROMPTS,
                    keys: set[tuple[str, int]] | None = None, anchor_keys: set[tuple[str, int]] | None = None,
                    test: ParityTest | str = ParityTest.NONINFERIORITY) -> CellCategories:
    """A cell's answers per category on `metric`; without a band, only the deltas and their intervals."""
    deltas = quality_deltas(index, cell_key, anchor_cell_key, split, metric, keys, anchor_keys)
    values = [deltas[p] for p in sorted(deltas)]
    overall = mean_interval(values) if values else None
    higher = SPECS[metric].direction == "higher"
    answers = category_answers(deltas, prompt_categories(index, cell_key, split),
                               band if band is not None else math.inf, min_prompts, test, higher)
    verdict = note = None
    if band is not None:
        verdict = parity_decision(values, band, alpha, test, higher)
        note = warning(label, answers) if verdict == "parity" else None
    return CellCategories(cell_key, label, metric, overall, verdict, band, answers, note, deltas)


def worst_prompts(index: Any, cells: CellCategories, anchor_cell_key: str, split: str, copy_image: CopyImage,
                  keys: set[tuple[str, int]] | None = None, k: int = WORST) -> list[dict[str, Any]]:
    """The cell's `k` worst prompts on its metric (each at its first seed), with its image and the anchor's."""
    sign = 1.0 if SPECS[cells.metric].direction == "higher" else -1.0
    worst = sorted(cells.deltas, key=lambda p: (sign * cells.deltas[p], p))[:k]
    rows = []
    for text_id in worst:
        mine = [r for r in index.samples_of(cells.cell_key, split)  # by text identity, then seed
                if r["prompt_sha"] == text_id and (keys is None or (r["prompt_sha"], r["seed"]) in keys)]
        if not mine:
            continue
        sample = mine[0]
        anchor = [r for r in [index.cell_samples(anchor_cell_key).get((text_id, sample["seed"]))] if r is not None]
        rows.append({"prompt_id": sample["prompt_id"], "prompt": sample["prompt"] or "",
                     "category": sample["category"] or "", "seed": sample["seed"], "delta": cells.deltas[text_id],
                     "image": copy_image(sample, cells.cell_key),
                     "anchor": copy_image(anchor[0] if anchor else None, anchor_cell_key)})
    return rows


def cells_quality(index: Any, cell_keys: list[str], metric: str | None = None, band: float | None = None,
                  alpha: float = 0.05, scope: Any = None) -> dict[str, dict[str, Any]]:
    """cell key -> its answers per category (CellCategories.as_dict) on each split it was indexed with, for
    `assess status --json`; the metric defaults to the first quality metric the cell has deltas on. With a scope
    (assess.statistics.scope.Scope: the runs asked about), each cell and its anchor over the scope's (prompt, seed) pairs only,
    as the report and the exports count them; a cell key is shared by every sweep that renders it."""
    from assess.errors import UnknownMetric
    from render.compose.metric_registry import quality_metric_names

    if metric is not None and metric not in quality_metric_names():
        raise UnknownMetric(f"unknown quality metric {metric!r}. Valid: {', '.join(quality_metric_names())}")
    out: dict[str, dict[str, Any]] = {}
    for cell_key in dict.fromkeys(cell_keys):
        runs = index.query("SELECT DISTINCT split, anchor_cell_key, is_anchor, describe FROM runs WHERE cell_key = ?",
                           (cell_key,))
        per_split = {}
        for run in runs:
            if run["is_anchor"]:
                continue
            keys = anchor_keys = None
            if scope is not None:
                own = scope.cells.get((cell_key, run["split"]))
                if own is None or own.is_anchor or own.anchor_cell_key != run["anchor_cell_key"]:
                    continue
                anchor = scope.cells.get((own.anchor_cell_key, run["split"]))
                keys, anchor_keys = own.keys, anchor.keys if anchor is not None else set()
            for name in [metric] if metric else quality_metric_names():
                answers = cell_categories(index, cell_key, run["anchor_cell_key"], run["split"], name,
                                          run["describe"] or cell_key, band, alpha, keys=keys, anchor_keys=anchor_keys)
                if answers.deltas or metric:
                    per_split[run["split"]] = answers.as_dict()
                    break
        if per_split:
            out[cell_key] = per_split
    return out
