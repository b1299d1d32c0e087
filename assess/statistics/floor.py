"""A metric's lossless floor on a model: how far renders that change no mathematics drift from the anchor.

A *lossless sibling* of an anchor is a cell that differs from it only in how the same arithmetic is carried out:
another attention backend (`attention=math` against `native`: the same softmax(QK^T)V, other kernels and
summation orders), or compilation (`compile=...`). Rendered on the anchor's prompts and seeds, its paired drift to
the anchor on a rule metric (SSIM below 1, LPIPS above 0, a CLIP-score difference) is noise the metric sees in
renders no one would call worse: the floor. A parity band below the floor asks the data to tell noise from noise;
`assess floor` measures it and suggests the band as a stated multiple of it, and every verdict table shows it
beside the band.

The floor of a (model's anchor, metric) is the largest mean drift (worse side) over its lossless siblings in the
index, with the upper end of its 95 % interval: (value, high, n prompts, which sibling).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

LOSSLESS = ("attention", "compile")  # cell fields whose values change no mathematics (docs/quality.md)
MULTIPLE = 3.0  # the suggested band, in floors: clear of the noise the metric sees in lossless renders


@dataclass(frozen=True)
class Floor:
    metric: str
    value: float  # mean drift on the worse side (>= 0, metric units)
    high: float | None  # upper end of its 95 % interval
    n: int  # prompts
    sibling: str  # the lossless sibling measured: what differs from the anchor
    anchor_cell_key: str

    def short(self, band: float | None) -> str:
        """`0.0012` and, with a band, how many floors wide it is."""
        text = f"{self.value:.2g}"
        if band is not None and self.value > 0:
            text += f" (band {band / self.value:.3g}×)"
        return text

    def suggestion(self, multiple: float = MULTIPLE) -> float:
        """The band `multiple` floors wide (on the interval's upper end when there is one: the cautious floor)."""
        return multiple * max(self.value, self.high or 0.0)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            out |= _flat(v, f"{prefix}{k}.")
        return out
    return {prefix.rstrip("."): node}


def lossless_difference(anchor: dict[str, Any], cell: dict[str, Any]) -> list[str] | None:
    """What differs between two canonical cells, when all of it is lossless (`attention=math`); None otherwise."""
    a, c = _flat(anchor), _flat(cell)
    differ = sorted(k for k in set(a) | set(c) if a.get(k) != c.get(k))
    if not differ or any(k.split(".")[0] not in LOSSLESS for k in differ):
        return None
    shown: dict[str, Any] = {}
    for key in differ:
        top = key.split(".")[0]
        shown.setdefault(top, c.get(f"{top}.name", c.get(top, c.get(key))))
    return [f"{k}={v}" for k, v in shown.items()]


def measure(index: Any, anchor_cell_key: str, metrics: Sequence[str]) -> dict[str, Floor]:
    """metric -> the floor of the anchor's model on it, from the lossless siblings in the index (none: absent)."""
    from assess.metrics import SPECS
    from assess.statistics.compare import mean_interval, quality_deltas

    anchors = index.runs_of(anchor_cell_key)[:1]
    if not anchors:
        return {}
    anchor = json.loads(anchors[0]["cell"])
    siblings = index.query("SELECT DISTINCT cell_key, cell, split FROM runs WHERE anchor_cell_key = ? AND is_anchor = 0",
                           (anchor_cell_key,))
    floors: dict[str, Floor] = {}
    for sibling in siblings:
        what = lossless_difference(anchor, json.loads(sibling["cell"]))
        if what is None:
            continue
        for metric in metrics:
            spec = SPECS.get(metric)
            deltas = quality_deltas(index, sibling["cell_key"], anchor_cell_key, sibling["split"], metric) if spec else {}
            if not deltas:
                continue
            sign = 1.0 if spec is not None and spec.direction == "higher" else -1.0
            worse = [max(0.0, -sign * d) for d in deltas.values()]  # drift on the worse side only
            estimate = mean_interval(worse)
            floor = Floor(metric, estimate.value, estimate.high, len(worse), " ".join(what), anchor_cell_key)
            if metric not in floors or floor.value > floors[metric].value:
                floors[metric] = floor
    return floors


def floors_of(index: Any, views: Sequence[Any]) -> dict[str, Floor]:
    """metric -> the largest floor over the anchors of a report's cells (assess.report.write.CellView rows)."""
    from render.compose.metric_registry import quality_metric_names

    out: dict[str, Floor] = {}
    for anchor in sorted({v.anchor_cell_key for v in views}):
        for metric, floor in measure(index, anchor, quality_metric_names()).items():
            if metric not in out or floor.value > out[metric].value:
                out[metric] = floor
    return out


def floor_lines(path: Any, db: Any, multiple: float = MULTIPLE) -> tuple[list[str], list[dict[str, Any]]]:
    """`assess floor`: per anchor of the indexed runs under `path`, each metric's floor and the band it suggests."""
    from assess.errors import NotScored
    from assess.index.database import Index
    from render.compose.metric_registry import quality_metric_names
    from assess.statistics.scope import path_scope

    lines: list[str] = []
    records: list[dict[str, Any]] = []
    with Index.open(db, create=False) as index:
        scope = path_scope(index, path)
        if scope is None:
            raise NotScored(f"none of the runs under {path} are in the index {index.path}: run `assess score {path}` first")
        anchors = sorted({c.anchor_cell_key for c in scope.cells.values()})
        for anchor in anchors:
            model = index.query("SELECT cell FROM runs WHERE cell_key = ? LIMIT 1", (anchor,))
            name = (json.loads(model[0]["cell"]).get("model") or {}).get("name", "?") if model else "?"
            floors = measure(index, anchor, quality_metric_names())
            if not floors:
                lines.append(f"anchor {anchor} (model {name}): no lossless sibling scored yet: render one on the "
                             f"anchor's prompts and seeds, e.g. python -m render model={name} attention=math "
                             "(same prompts, seeds), then assess score")
            for metric, f in sorted(floors.items()):
                band = f.suggestion(multiple)
                high = f" (95 % up to {f.high:.3g})" if f.high is not None else ""
                lines.append(f"anchor {anchor} (model {name}): {metric} floor {f.value:.3g}{high} over {f.n} prompt(s), "
                             f"measured on {f.sibling}; band = {multiple:g} x floor = {band:.3g}: "
                             f"experiment.quality.band={band:.3g}")
                records.append({**f.as_dict(), "model": name, "multiple": multiple, "band": band})
    return lines, records
