"""The one speed axis every speed-vs-quality plot draws (the report's Pareto plot, the climb's frontier):
median warm latency per image, lower is faster; the climb's frontier draws its objective (GPU-seconds per image
under experiment.objective=gpu_seconds)."""

from __future__ import annotations

from typing import Sequence

METRIC = "latency_median_s"  # the index metric the axis reads (assess.metrics.speed)
LABEL = "median warm latency (s/image, lower is faster)"


def label(objective: str) -> str:
    """The axis label of a climb objective (render.laws.rule.Objective)."""
    return "median warm GPU-seconds (latency x GPUs, GPU-s/image, lower is better)" if objective == "gpu_seconds" else LABEL


def frontier(points: Sequence[tuple[float, float]], quality_higher: bool) -> list[int]:
    """Indices of the (latency, quality) points on the Pareto frontier, fastest first."""
    from assess.statistics.compare import pareto_front

    return sorted(pareto_front(points, maximize=(False, quality_higher)), key=lambda i: points[i][0])
