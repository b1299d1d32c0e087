"""The statistics of one cell against the anchor on the first `rung` dev prompts (pure functions).

Per cell and rung, from the paired per-prompt quality deltas d_p = cell - anchor (each prompt's
seeds averaged first; for a reference metric such as SSIM the anchor's own value is the identity, 1):

- the mean delta with a 95 % percentile bootstrap interval (resampling prompts);
- a two-sided Wilcoxon signed-rank test of "no difference" (assess.stats.wilcoxon_p);
- parity, an equivalence test against the band: TOST with two one-sided paired t-tests,
  H0: mean <= -band or mean >= +band; p = the larger one-sided p (the same as asking whether the
  (1 - 2 alpha) t-interval lies inside the band: "CI inside the band");
- out of band, the mirror test: the mean lies beyond the band on the side it falls, one-sided t,
  doubled for choosing the side;
- the median warm latency (the objective) over the same prompts.

Across the cells evaluated at the same rung, the Wilcoxon p-values are Holm-adjusted (`holm`):
which cells differ from the anchor, the family-wise error controlled. A cell is at parity when its
TOST p < alpha, out of band when its out-of-band p < alpha (it is then dropped from promotion),
else undecided. The TOST is not adjusted: on dev it only steers the search (the incumbent is the
fastest cell at parity, a choice by latency, not by p-value), and the claim that counts is the
final's single, pre-planned TOST on the holdout, which no dev selection has touched.
(benchmarks/climb.py: Holm on the dev TOST lowered the rate of finding the true best cell from 90 %
to 64 % at the same cost, with no false parity either way.)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

N_RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 0


@dataclass(frozen=True)
class Evaluation:
    """One cell at one rung."""

    rung: int  # prompts.limit: the first `rung` dev prompts
    n: int  # prompts with a quality delta
    missing: tuple[str, ...]  # rung prompts without one (unavailable scores)
    mean: float | None  # mean quality delta to the anchor (metric units, cell - anchor)
    low: float | None  # 95 % bootstrap interval of the mean
    high: float | None
    wilcoxon_p: float | None  # two-sided, "differs from the anchor"
    tost_p: float | None  # equivalence within +-band (raw)
    out_p: float | None  # beyond the band (raw)
    latency: float | None  # median warm latency, s/image
    n_warm: int
    wilcoxon_holm: float | None = None
    verdict: str = "undecided"  # parity | out | undecided | no-data

    def as_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items()}


def bootstrap_mean(values: Sequence[float], n_resamples: int = N_RESAMPLES, seed: int = SEED
                   ) -> tuple[float | None, float | None]:
    """95 % percentile bootstrap interval of the mean (prompts resampled); None below two values."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    if data.size < 2:
        return None, None
    if float(np.ptp(data)) == 0.0:
        return float(data[0]), float(data[0])
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(n_resamples, data.size))].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def _t_sf(t: float, df: int) -> float:
    """P(T > t) for Student's t with df degrees of freedom (scipy.special.stdtr: no distribution-object overhead)."""
    from scipy.special import stdtr

    return float(stdtr(df, -t))


def tost(deltas: Sequence[float], band: float) -> tuple[float | None, float | None]:
    """(equivalence p, out-of-band p) of the mean delta against +-band, paired t; None below two values.

    Zero spread (every delta equal, e.g. the anchor against itself) decides by the value alone."""
    n = len(deltas)
    if n < 2:
        return None, None
    mean = statistics.fmean(deltas)
    sd = statistics.stdev(deltas)
    if sd == 0.0:
        inside, outside = abs(mean) < band, abs(mean) > band
        return (0.0 if inside else 1.0), (0.0 if outside else 1.0)
    se = sd / math.sqrt(n)
    p_above_low = _t_sf((mean + band) / se, n - 1)  # H0: mean <= -band
    p_below_high = _t_sf((band - mean) / se, n - 1)  # H0: mean >= +band
    equivalence = max(p_above_low, p_below_high)
    beyond = _t_sf((abs(mean) - band) / se, n - 1)  # H0: |mean| <= band, on the side the mean lies
    return equivalence, min(1.0, 2 * beyond)


def holm(p_values: Mapping[object, float | None]) -> dict[object, float | None]:
    """Holm step-down adjusted p-values (monotone, capped at 1); None stays None."""
    given = sorted(((p, k) for k, p in p_values.items() if p is not None), key=lambda x: (x[0], str(x[1])))
    m = len(given)
    adjusted: dict[object, float | None] = {k: None for k, p in p_values.items() if p is None}
    running = 0.0
    for i, (p, key) in enumerate(given):
        running = max(running, min(1.0, (m - i) * p))
        adjusted[key] = running
    return adjusted


def evaluate(deltas: Mapping[str, float], latencies: Mapping[str, Sequence[float]], prompt_ids: Sequence[str],
             band: float) -> Evaluation:
    """One cell on these prompts (the rung's), before any correction across cells."""
    values = tuple(deltas.get(p) for p in prompt_ids)
    warm = tuple(tuple(latencies.get(p, ())) for p in prompt_ids)
    return _evaluate(values, warm, tuple(prompt_ids), band)


@lru_cache(maxsize=8192)
def _evaluate(values_or_none: tuple[float | None, ...], warm_by_prompt: tuple[tuple[float, ...], ...],
              prompt_ids: tuple[str, ...], band: float) -> Evaluation:
    """Pure and cached: a climb re-evaluates the same cells at the same rungs every generation."""
    from assess.stats import wilcoxon_p

    values = [v for v in values_or_none if v is not None]
    missing = tuple(p for p, v in zip(prompt_ids, values_or_none, strict=True) if v is None)
    warm = [x for per_prompt in warm_by_prompt for x in per_prompt]
    latency = statistics.median(warm) if warm else None
    if not values:
        return Evaluation(len(prompt_ids), 0, missing, None, None, None, None, None, None, latency, len(warm),
                          verdict="no-data")
    low, high = bootstrap_mean(values)
    w_p, _why = wilcoxon_p(values) if len(values) >= 2 else (None, None)
    tost_p, out_p = tost(values, band)
    return Evaluation(len(prompt_ids), len(values), missing, statistics.fmean(values), low, high, w_p, tost_p, out_p,
                      latency, len(warm))


def correct(evaluations: Mapping[object, Evaluation], alpha: float) -> dict[object, Evaluation]:
    """Holm across the cells of one rung (Wilcoxon), then each cell's verdict."""
    w = holm({k: e.wilcoxon_p for k, e in evaluations.items()})
    out = {}
    for key, e in evaluations.items():
        if e.verdict == "no-data":
            out[key] = e
            continue
        if e.tost_p is not None and e.tost_p < alpha:
            verdict = "parity"
        elif e.out_p is not None and e.out_p < alpha:
            verdict = "out"
        else:
            verdict = "undecided"
        out[key] = replace(e, wilcoxon_holm=w[key], verdict=verdict)
    return out
