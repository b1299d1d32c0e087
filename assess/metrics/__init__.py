"""The metrics: declared in registry.py (one `MetricSpec` each), computed by one module per family
(speed, fidelity, alignment, shapes). `SPECS` is every metric's spec (sample and cell level), which
is also what the index's `metrics` table holds; sample metrics are built from their spec's
`compute` path, so a family's heavy imports wait until it is scored.
"""

from __future__ import annotations

import importlib

from assess.errors import UnknownMetric
from assess.metrics.base import Outcome, SampleInput, SampleMetric
from assess.metrics.registry import SPECS, MetricSpec, sample_metric_names


def metric_class(spec: MetricSpec) -> type[SampleMetric]:
    """The compute class a sample metric's spec names ("module:Class")."""
    if spec.compute is None:
        raise UnknownMetric(f"{spec.name} is a cell-level metric: it is computed per cell, not per sample")
    module, _, name = spec.compute.partition(":")
    cls: type[SampleMetric] = getattr(importlib.import_module(module), name)
    return cls


def build_sample_metrics(names: list[str] | None = None, clip_model: str | None = None) -> list[SampleMetric]:
    """Instantiate the named sample metrics (all when names is None); a typo lists the valid names."""
    valid = sample_metric_names()
    names = valid if names is None else names
    unknown = [n for n in names if n not in valid]
    if unknown:
        raise UnknownMetric(f"unknown metric(s): {', '.join(unknown)}. Valid metrics are: {', '.join(valid)}")
    return [metric_class(SPECS[name]).from_options(clip_model=clip_model) for name in names]


__all__ = ["SPECS", "MetricSpec", "Outcome", "SampleInput", "SampleMetric", "build_sample_metrics", "metric_class"]
