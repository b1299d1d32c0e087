"""What every metric computes: outcomes, and the sample metric's interface (specs: render.compose.metric_registry).

An outcome is a finite value or an explicit "unavailable" with its reason; never 0, -1 or NaN
as a stand-in (docs: STYLE.md, rule 7).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from render.compose.metric_registry import MetricSpec

if TYPE_CHECKING:
    import numpy as np

class SetupProblem(str):
    """An unavailable reason that is this machine's setup, the same for every sample: a model not at hand offline,
    a package not installed. A str, stored and counted like any reason, that also says what is missing in a few
    words and the fix every metric it stops shares, so `assess score` names them all in one line
    (assess.scoring.tally.ScoreSummary); the reason itself, with its own fix, is what `assess score -v` prints."""

    missing: str
    fix: str

    def __new__(cls, reason: str, missing: str = "", fix: str = "") -> SetupProblem:
        problem = super().__new__(cls, reason)
        problem.missing, problem.fix = missing, fix
        return problem


@dataclass(frozen=True)
class Outcome:
    """A metric's result for one sample or cell: a finite value, or unavailable with a reason."""

    value: float | None
    unavailable_reason: str | None = None
    detail: str | None = None
    low: float | None = None  # its 95 % interval, where one is computed (the speed figures)
    high: float | None = None

    def __post_init__(self) -> None:
        if (self.value is None) == (self.unavailable_reason is None):
            raise ValueError("an outcome has exactly one of: a value, an unavailable reason")
        if self.value is not None and not math.isfinite(self.value):
            raise ValueError(f"metric values must be finite, got {self.value!r}; record unavailable instead")

    @classmethod
    def of(cls, value: float, detail: str | None = None, low: float | None = None, high: float | None = None) -> Outcome:
        return cls(float(value), None, detail, low, high)

    @classmethod
    def unavailable(cls, reason: str) -> Outcome:
        return cls(None, reason)

    @property
    def available(self) -> bool:
        return self.value is not None


@dataclass
class SampleInput:
    """What a sample-level metric sees of one sample."""

    prompt_id: str
    seed: int
    image: np.ndarray  # H x W x 3, uint8
    prompt: str | None
    reference: np.ndarray | None = None  # the anchor's image (same prompt, seed), when found
    reference_missing: str | None = None  # why there is no reference (what renders it)
    previous: np.ndarray | None = None  # a clip's frame before this one (assess.metrics.frames), for temporal metrics


class SampleMetric(ABC):
    """A metric computed per sample, in batches."""

    spec: MetricSpec
    first_frame = 0  # a clip's frames from this one on are scored (a temporal metric starts at the second)

    @classmethod
    def from_options(cls, models: Mapping[str, str] | None = None) -> SampleMetric:
        """An instance for `assess score`'s options: `models` maps a metric name to the model it uses
        (`--metric-model`, `--clip-model`); only the metrics that use a model read it."""
        return cls()

    @property
    def config(self) -> str:
        """What else fixes the numbers (e.g. the CLIP model); a change re-scores like a version bump."""
        return ""

    def score(self, inputs: list[SampleInput]) -> list[Outcome]:
        """One outcome per input, in order. Reference checks are done here, once for all."""
        outcomes: list[Outcome | None] = [None] * len(inputs)
        ready: list[int] = []
        for i, item in enumerate(inputs):
            problem = self._reference_problem(item) if self.spec.needs_reference else None
            if problem:
                outcomes[i] = Outcome.unavailable(problem)
            else:
                ready.append(i)
        if ready:
            for i, outcome in zip(ready, self.compute([inputs[i] for i in ready]), strict=True):
                outcomes[i] = outcome
        return [o for o in outcomes if o is not None]

    @staticmethod
    def _reference_problem(item: SampleInput) -> str | None:
        if item.reference is None:
            return item.reference_missing or "no anchor sample for this prompt and seed"
        if item.reference.shape != item.image.shape:
            h, w = item.image.shape[:2]
            rh, rw = item.reference.shape[:2]
            return f"anchor image is {rw}x{rh}, this sample is {w}x{h}: not comparable"
        return None

    @abstractmethod
    def compute(self, inputs: list[SampleInput]) -> list[Outcome]:
        """Outcomes for inputs whose reference (if needed) is present and comparable."""


class SetMetric(ABC):
    """A metric of a set: a cell's images against the anchor's images of the same prompts and seeds."""

    spec: MetricSpec
    min_pairs = 2

    @classmethod
    def from_options(cls, models: Mapping[str, str] | None = None) -> SetMetric:
        return cls()

    @property
    def config(self) -> str:
        return ""

    def score(self, images: list[np.ndarray], references: list[np.ndarray]) -> Outcome:
        """One outcome for the pairs (images[i], references[i]); too few pairs is unavailable, with the count."""
        if len(images) != len(references):
            raise ValueError(f"{len(images)} images but {len(references)} references")
        if len(images) < self.min_pairs:
            return Outcome.unavailable(f"{self.spec.name} needs at least {self.min_pairs} samples paired with the "
                                       f"anchor's; {len(images)} found")
        return self.compute(images, references)

    @abstractmethod
    def compute(self, images: list[np.ndarray], references: list[np.ndarray]) -> Outcome:
        """The set's outcome; its detail names the sample size."""
