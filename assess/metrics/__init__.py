"""The metric registry: one module per family (speed, fidelity, alignment, shapes).

`SAMPLE_METRICS` maps a name to a factory for the sample-level metrics; `SPECS` lists every
metric's spec (sample and cell level), which is also what the index's `metrics` table holds.
"""

from __future__ import annotations

from collections.abc import Callable

from assess.errors import UnknownMetric
from assess.metrics.alignment import CLIP_SCORE, CLIPScoreMetric
from assess.metrics.base import MetricSpec, Outcome, SampleInput, SampleMetric
from assess.metrics.fidelity import LPIPS, PSNR, SSIM, LPIPSMetric, PSNRMetric, SSIMMetric
from assess.metrics.shapes import SHAPES_FIT, SHAPES_METRIC, ShapesFitMetric, ShapesMetric
from assess.metrics.speed import SPEED_SPECS

SAMPLE_METRICS: dict[str, tuple[MetricSpec, Callable[..., SampleMetric]]] = {
    PSNR.name: (PSNR, lambda clip_model=None: PSNRMetric()),
    SSIM.name: (SSIM, lambda clip_model=None: SSIMMetric()),
    LPIPS.name: (LPIPS, lambda clip_model=None: LPIPSMetric()),
    CLIP_SCORE.name: (CLIP_SCORE, lambda clip_model=None: CLIPScoreMetric(clip_model)),
    SHAPES_METRIC.name: (SHAPES_METRIC, lambda clip_model=None: ShapesMetric()),
    SHAPES_FIT.name: (SHAPES_FIT, lambda clip_model=None: ShapesFitMetric()),
}
SPECS: dict[str, MetricSpec] = {spec.name: spec for spec, _ in SAMPLE_METRICS.values()}
SPECS.update({spec.name: spec for spec in SPEED_SPECS})


def build_sample_metrics(names: list[str] | None = None, clip_model: str | None = None) -> list[SampleMetric]:
    """Instantiate the named sample metrics (all when names is None); a typo lists the valid names."""
    names = list(SAMPLE_METRICS) if names is None else names
    unknown = [n for n in names if n not in SAMPLE_METRICS]
    if unknown:
        raise UnknownMetric(
            f"unknown metric(s): {', '.join(unknown)}. Valid metrics are: {', '.join(SAMPLE_METRICS)}"
        )
    return [SAMPLE_METRICS[name][1](clip_model=clip_model) for name in names]


__all__ = [
    "SAMPLE_METRICS", "SPECS", "MetricSpec", "Outcome", "SampleInput", "SampleMetric", "build_sample_metrics",
]
