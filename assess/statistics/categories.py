"""Answers per category: where a cell's quality falls, from its paired per-prompt deltas to the anchor.

A cell's per-prompt deltas (cell - anchor, each prompt's seeds averaged; assess.statistics.compare.per_prompt_deltas)
are grouped by the prompts' categories in their suite. Each category gets its mean delta with a 95 %
bootstrap interval (assess.statistics.compare.mean_interval) and the out-of-band test (assess.statistics.compare.tost's mirror
test). A category is *out of band* when its mean delta lies beyond the parity band; one with at least
`min_prompts` prompts that is out of band *breaks* the cell there: flagged (a warning) when the cell is
at parity overall, and, with `experiment.quality.per_category: true`, it denies the cell parity.
Categories with fewer prompts are shown, never flagged: their mean says too little.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from assess.statistics.compare import ParityTest, mean_interval, parity_test

MIN_PROMPTS = 8  # prompts a category needs before it can be flagged


@dataclass(frozen=True)
class CategoryAnswer:
    category: str
    n: int  # prompts of the category with a delta
    mean: float  # mean delta to the anchor (cell - anchor, metric units)
    low: float | None  # 95 % bootstrap interval of the mean
    high: float | None
    out_p: float | None  # the out-of-band test's p (beyond the band on the side the mean falls)
    band: float
    min_prompts: int = MIN_PROMPTS
    test: str = ParityTest.NONINFERIORITY.value  # non-inferiority: out of band only on the worse side
    higher_is_better: bool = True

    @property
    def out_of_band(self) -> bool:
        if self.test == ParityTest.EQUIVALENCE.value:
            return abs(self.mean) > self.band
        return (self.mean if self.higher_is_better else -self.mean) < -self.band

    @property
    def enough(self) -> bool:
        return self.n >= self.min_prompts

    @property
    def breaks(self) -> bool:
        """Out of band on enough prompts to say so."""
        return self.enough and self.out_of_band

    def text(self) -> str:
        interval = f" [{self.low:+.4g}, {self.high:+.4g}]" if self.low is not None and self.high is not None else ""
        p = f", out-of-band p={self.out_p:.2g}" if self.out_p is not None else ""
        return f"{self.category}: {self.mean:+.4g}{interval} over {self.n} prompt(s){p}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "out_of_band": self.out_of_band, "enough": self.enough, "breaks": self.breaks}


def category_answers(deltas: Mapping[str, float], categories: Mapping[str, str | None], band: float,
                     min_prompts: int = MIN_PROMPTS, test: ParityTest | str = ParityTest.NONINFERIORITY,
                     higher_is_better: bool = True) -> tuple[CategoryAnswer, ...]:
    """One answer per category of the prompts that have a delta (prompts without a category are left out),
    worst first (the mean furthest beyond the band)."""
    groups: dict[str, list[float]] = defaultdict(list)
    for prompt_id in sorted(deltas):
        category = categories.get(prompt_id)
        if category:
            groups[category].append(deltas[prompt_id])
    answers = []
    for category, values in groups.items():
        interval = mean_interval(values)
        _, out_p = parity_test(values, band, test, higher_is_better)
        answers.append(CategoryAnswer(category, len(values), float(interval.value), interval.low, interval.high,
                                      out_p, band, min_prompts, str(test), higher_is_better))
    return tuple(sorted(answers, key=lambda a: (-abs(a.mean), a.category)))


def broken(answers: Sequence[CategoryAnswer]) -> list[CategoryAnswer]:
    return [a for a in answers if a.breaks]


def warning(label: str, answers: Sequence[CategoryAnswer]) -> str | None:
    """The warning for a cell at parity overall that breaks on some category, or None."""
    bad = broken(answers)
    if not bad:
        return None
    return (f"{label} is at parity overall but out of band on {len(bad)} categor{'y' if len(bad) == 1 else 'ies'}: "
            + "; ".join(a.text() for a in bad))
