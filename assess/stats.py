"""Statistics of a cell against its anchor (scipy), seeded so that reruns give the same numbers.

- A sample metric without a reference (CLIP score): the paired per-prompt difference to the
  anchor (each side averaged over seeds first), its mean with a 95 % bootstrap interval, and
  the Wilcoxon signed-rank p-value.
- A reference metric (PSNR, SSIM, LPIPS) already compares with the anchor: the per-prompt mean
  with a 95 % bootstrap interval.
- Speed: speed-up = anchor median warm latency / cell median warm latency, with a two-sample
  bootstrap (percentile) interval.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CONFIDENCE = 0.95
N_RESAMPLES = 2000
SEED = 0


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its interval (None when it cannot be had: see note)."""

    value: float
    low: float | None
    high: float | None
    n: int
    p_value: float | None = None
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n,
                "p_value": self.p_value, "note": self.note}


def _interval(result: Any) -> tuple[float | None, float | None]:
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if math.isnan(low) or math.isnan(high):
        return None, None
    return low, high


def mean_interval(values: Sequence[float], seed: int = SEED) -> Estimate:
    """Mean with a 95 % BCa bootstrap interval (percentile when BCa is degenerate)."""
    import numpy as np
    from scipy import stats

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("no values")
    mean = float(data.mean())
    if data.size < 2:
        return Estimate(mean, None, None, 1, note="one value: no interval")
    if float(np.ptp(data)) == 0.0:
        return Estimate(mean, mean, mean, int(data.size), note="all values equal")
    low: float | None = None
    high: float | None = None
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=RuntimeWarning)
            warnings.simplefilter("ignore", category=stats.DegenerateDataWarning)
            result = stats.bootstrap((data,), np.mean, confidence_level=CONFIDENCE, n_resamples=N_RESAMPLES,
                                     method=method, rng=np.random.default_rng(seed))
        low, high = _interval(result)
        if low is not None:
            break
    return Estimate(mean, low, high, int(data.size))


def wilcoxon_p(differences: Sequence[float]) -> tuple[float | None, str | None]:
    """Two-sided Wilcoxon signed-rank p-value, or None with why."""
    from scipy import stats

    nonzero = [d for d in differences if d != 0]
    if not nonzero:
        return None, "all differences are 0"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        result = stats.wilcoxon(list(differences), zero_method="wilcox")
    p = float(result.pvalue)
    return (None, "p-value undefined") if math.isnan(p) else (p, None)


def per_prompt(values: Mapping[tuple[str, int], float]) -> dict[str, float]:
    """(prompt_id, seed) -> value  ==>  prompt_id -> mean over its seeds."""
    groups: dict[str, list[float]] = defaultdict(list)
    for (prompt_id, _seed), value in values.items():
        groups[prompt_id].append(value)
    return {p: sum(v) / len(v) for p, v in groups.items()}


def paired_delta(cell: Mapping[tuple[str, int], float], anchor: Mapping[tuple[str, int], float],
                 seed: int = SEED) -> Estimate | None:
    """Mean per-prompt difference cell - anchor over the samples both have, with CI and p-value."""
    shared = set(cell) & set(anchor)
    if not shared:
        return None
    cell_p = per_prompt({k: cell[k] for k in shared})
    anchor_p = per_prompt({k: anchor[k] for k in shared})
    diffs = [cell_p[p] - anchor_p[p] for p in sorted(cell_p)]
    estimate = mean_interval(diffs, seed)
    p_value, why = wilcoxon_p(diffs)
    note = "; ".join(n for n in (estimate.note, why) if n) or None
    return Estimate(estimate.value, estimate.low, estimate.high, estimate.n, p_value, note)


def reference_mean(cell: Mapping[tuple[str, int], float], seed: int = SEED) -> Estimate | None:
    """Per-prompt mean of a metric that already compares with the anchor, with its CI."""
    if not cell:
        return None
    return mean_interval(list(per_prompt(cell).values()), seed)


def speedup(anchor_latencies: Sequence[float], cell_latencies: Sequence[float], seed: int = SEED) -> Estimate | None:
    """median(anchor) / median(cell) with a two-sample bootstrap interval."""
    import numpy as np
    from scipy import stats

    a = np.asarray(anchor_latencies, dtype=float)
    c = np.asarray(cell_latencies, dtype=float)
    if a.size == 0 or c.size == 0:
        return None
    value = float(np.median(a) / np.median(c))
    if a.size < 2 or c.size < 2:
        return Estimate(value, None, None, int(min(a.size, c.size)), note="fewer than 2 warm samples: no interval")

    def ratio(x: Any, y: Any, axis: int = -1) -> Any:
        return np.median(x, axis=axis) / np.median(y, axis=axis)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        result = stats.bootstrap((a, c), ratio, confidence_level=CONFIDENCE, n_resamples=N_RESAMPLES,
                                 method="percentile", vectorized=True, rng=np.random.default_rng(seed))
    low, high = _interval(result)
    return Estimate(value, low, high, int(min(a.size, c.size)))


@dataclass(frozen=True)
class CellComparison:
    cell_key: str
    anchor_cell_key: str
    metrics: dict[str, Estimate]  # metric -> mean (reference metrics) or delta to the anchor
    kinds: dict[str, str]  # metric -> "mean" | "delta"
    speedup: Estimate | None


def _sample_values(index: Any, cell_key: str, split: str) -> dict[str, dict[tuple[str, int], float]]:
    rows = index.query(
        "SELECT s.metric, s.prompt_id, s.seed, s.value FROM scores s JOIN samples p USING (cell_key, prompt_id, seed) "
        "WHERE s.cell_key = ? AND p.split = ? AND s.value IS NOT NULL",
        (cell_key, split),
    )
    out: dict[str, dict[tuple[str, int], float]] = defaultdict(dict)
    for r in rows:
        out[r["metric"]][(r["prompt_id"], r["seed"])] = r["value"]
    return out


def _warm_latencies(index: Any, cell_key: str, split: str) -> list[float]:
    rows = index.query(
        "SELECT latency_s FROM samples WHERE cell_key = ? AND split = ? AND warmup = 0 AND latency_s IS NOT NULL",
        (cell_key, split),
    )
    return [r["latency_s"] for r in rows]


def compare_cell(index: Any, cell_key: str, anchor_cell_key: str, split: str) -> CellComparison:
    """Every statistic of one cell against its anchor, from the index."""
    from assess.metrics import SPECS

    cell = _sample_values(index, cell_key, split)
    anchor = _sample_values(index, anchor_cell_key, split)
    metrics: dict[str, Estimate] = {}
    kinds: dict[str, str] = {}
    for name, values in cell.items():
        spec = SPECS.get(name)
        if spec is None:
            continue
        if spec.needs_reference:
            estimate, kind = reference_mean(values), "mean"
        else:
            estimate, kind = paired_delta(values, anchor.get(name, {})), "delta"
        if estimate is not None:
            metrics[name], kinds[name] = estimate, kind
    speed = speedup(_warm_latencies(index, anchor_cell_key, split), _warm_latencies(index, cell_key, split))
    return CellComparison(cell_key, anchor_cell_key, metrics, kinds, speed)
