"""The statistics of one cell against the anchor on the first `rung` dev prompts (pure functions).

Per cell and rung, from the paired per-prompt quality deltas d_p = cell - anchor (each prompt's
seeds averaged first; for a reference metric such as SSIM the anchor's own value is the identity, 1):

- the mean delta with a 95 % bootstrap interval (resampling prompts; assess.statistics.compare.mean_interval);
- a two-sided Wilcoxon signed-rank test of "no difference" (assess.statistics.compare.wilcoxon_p);
- parity under the experiment's test (assess.statistics.compare.parity_test): by default *non-inferiority*, one
  paired t-test of H0: mean <= -band (the delta turned so that higher is better), i.e. the lower end of
  the (1 - 2 alpha) interval above -band: a cell better than the anchor is at parity; or, with
  `quality.test: equivalence`, TOST with two one-sided paired t-tests, H0: mean <= -band or mean >= +band,
  p = the larger one-sided p ("CI inside the band");
- out of band, the mirror test: the mean lies beyond the band (non-inferiority: on the worse side);
- the objective's median over the same prompts: warm latency per image, or under experiment.objective=gpu_seconds
  latency x the cell's width (the caller passes the latencies so scaled: assess.climb.plan.Plan.per_image).

Per category of the rung's prompts (assess.statistics.categories): the same mean delta and interval, and whether the
category is out of band. A cell at parity that is out of band on a category with enough prompts carries a
warning; with `experiment.quality.per_category: true` it is not at parity (out when that category's
out-of-band test says so, else undecided).

Across the cells evaluated at the same rung, the Wilcoxon p-values are Holm-adjusted (assess.statistics.compare.holm):
which cells differ from the anchor, the family-wise error controlled. A cell is at parity when its
TOST p < alpha, out of band when its out-of-band p < alpha (it is then dropped from promotion),
else undecided. The TOST is not adjusted: on dev it only steers the search (the incumbent is the
fastest cell at parity, a choice by latency, not by p-value), and the claim that counts is the
final's single, pre-planned TOST on the holdout, which no dev selection has touched.
(benchmarks/climb.py: Holm on the dev TOST lowered the rate of finding the true best cell from 90 %
to 64 % at the same cost, with no false parity either way.)
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TypeVar

from assess.statistics.categories import MIN_PROMPTS, CategoryAnswer, broken, category_answers
from assess.statistics.compare import ParityTest, Verdict, holm, mean_interval, parity_test, parity_verdict, wilcoxon_p


K = TypeVar("K", bound=Hashable)  # what a rung's cells are keyed by (their coordinates)


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
    tost_p: float | None  # the parity test's p (raw): non-inferiority (default) or TOST, as the rule says
    out_p: float | None  # beyond the band (raw)
    latency: float | None  # the objective's median: warm latency (s/image), or GPU-s/image under gpu_seconds
    n_warm: int
    wilcoxon_holm: float | None = None
    verdict: Verdict = Verdict.UNDECIDED
    categories: tuple[CategoryAnswer, ...] = ()  # per category of the rung's prompts, worst first

    @property
    def breaks(self) -> list[CategoryAnswer]:
        """Categories with enough prompts that are out of band."""
        return broken(self.categories)

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {k: v for k, v in self.__dict__.items() if k != "categories"}
        return {**out, "categories": [a.as_dict() for a in self.categories]}


def evaluate(deltas: Mapping[str, float], latencies: Mapping[str, Sequence[float]], prompt_ids: Sequence[str],
             band: float, categories: Mapping[str, str | None] | None = None, min_prompts: int = MIN_PROMPTS,
             test: ParityTest | str = ParityTest.NONINFERIORITY, higher_is_better: bool = True) -> Evaluation:
    """One cell on these prompts (the rung's), before any correction across cells; `categories`: each
    prompt's category in its suite (None: no answers per category)."""
    values = tuple(deltas.get(p) for p in prompt_ids)
    warm = tuple(tuple(latencies.get(p, ())) for p in prompt_ids)
    labels = tuple((categories or {}).get(p) for p in prompt_ids)
    return _evaluate(values, warm, tuple(prompt_ids), band, labels, min_prompts, str(test), higher_is_better)


@lru_cache(maxsize=8192)
def _evaluate(values_or_none: tuple[float | None, ...], warm_by_prompt: tuple[tuple[float, ...], ...],
              prompt_ids: tuple[str, ...], band: float, labels: tuple[str | None, ...] = (),
              min_prompts: int = MIN_PROMPTS, test: str = ParityTest.NONINFERIORITY.value,
              higher_is_better: bool = True) -> Evaluation:
    """Pure and cached: a climb re-evaluates the same cells at the same rungs every generation."""
    values = [v for v in values_or_none if v is not None]
    missing = tuple(p for p, v in zip(prompt_ids, values_or_none, strict=True) if v is None)
    warm = [x for per_prompt in warm_by_prompt for x in per_prompt]
    latency = statistics.median(warm) if warm else None
    if not values:
        return Evaluation(len(prompt_ids), 0, missing, None, None, None, None, None, None, latency, len(warm),
                          verdict=Verdict.NO_DATA)
    interval = mean_interval(values)
    w_p, _why = wilcoxon_p(values) if len(values) >= 2 else (None, None)
    tost_p, out_p = parity_test(values, band, test, higher_is_better)
    present = {p: v for p, v in zip(prompt_ids, values_or_none, strict=True) if v is not None}
    answers = category_answers(present, dict(zip(prompt_ids, labels, strict=False)), band, min_prompts, test,
                               higher_is_better)
    return Evaluation(len(prompt_ids), len(values), missing, interval.value, interval.low, interval.high, w_p, tost_p,
                      out_p, latency, len(warm), categories=answers)


def verdict_of(e: Evaluation, alpha: float, per_category: bool = False) -> Verdict:
    """The overall verdict; with per_category, parity also needs every category with enough prompts in band."""
    verdict = parity_verdict(e.tost_p, e.out_p, alpha, e.n)
    if per_category and verdict == Verdict.PARITY and e.breaks:
        out = any(a.out_p is not None and a.out_p < alpha for a in e.breaks)
        verdict = Verdict.OUT if out else Verdict.UNDECIDED
    return verdict


def correct(evaluations: Mapping[K, Evaluation], alpha: float, per_category: bool = False
            ) -> dict[K, Evaluation]:
    """Holm across the cells of one rung (Wilcoxon), then each cell's verdict."""
    w = holm({k: e.wilcoxon_p for k, e in evaluations.items()})
    out: dict[K, Evaluation] = {}
    for key, e in evaluations.items():
        if e.verdict == Verdict.NO_DATA:
            out[key] = e
            continue
        out[key] = replace(e, wilcoxon_holm=w[key], verdict=verdict_of(e, alpha, per_category))
    return out
