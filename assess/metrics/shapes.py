"""The shapes model's metrics: `shapes` (1 when the caption's colour, shape and position are all in
the image, else 0; the per-attribute verdicts in the outcome's detail) and `shapes_fit` (the soft
IoU with the asked shape), both read off the checker's verdict (render/models/shapes/checker.py).
Both are unavailable for prompts outside the shapes grammar (render/models/shapes/data.py).
"""

from __future__ import annotations

from assess.metrics.base import Outcome, SampleInput, SampleMetric
from render.compose.metric_registry import SHAPES as SHAPES_METRIC
from render.compose.metric_registry import SHAPES_FIT
from render.models.shapes.checker import NotAShapesCaption, Verdict, check

__all__ = ["NotAShapesCaption", "ShapesFitMetric", "ShapesMetric", "Verdict", "check"]


def _verdict_or_reason(item: SampleInput) -> Verdict | str:
    if not item.prompt:
        return "samples.jsonl has no prompt text for this sample"
    try:
        return check(item.image, item.prompt)
    except NotAShapesCaption as error:
        return f"{error}; the shapes metrics score only the shapes model's prompts"
    except ValueError as error:
        return str(error)


class _VerdictMetric(SampleMetric):
    """A metric read off the checker's verdict; unavailable (with the reason) when there is none."""

    def value(self, verdict: Verdict) -> float:
        raise NotImplementedError

    def compute(self, inputs: list[SampleInput]) -> list[Outcome]:
        outcomes = []
        for item in inputs:
            verdict = _verdict_or_reason(item)
            if isinstance(verdict, str):
                outcomes.append(Outcome.unavailable(verdict))
            else:
                outcomes.append(Outcome.of(self.value(verdict), verdict.detail()))
        return outcomes


class ShapesMetric(_VerdictMetric):
    """1 when colour, shape and position are all right, else 0; the verdicts in the detail."""

    spec = SHAPES_METRIC

    def value(self, verdict: Verdict) -> float:
        return 1.0 if verdict.correct else 0.0


class ShapesFitMetric(_VerdictMetric):
    """Soft IoU with the asked shape: the continuous companion of `shapes`."""

    spec = SHAPES_FIT

    def value(self, verdict: Verdict) -> float:
        return verdict.fit
