"""The metrics: declared in render.compose.metric_registry (one `MetricSpec` each), computed by one module per family
(speed, fidelity, alignment, preference, distribution, shapes). `SPECS` is every metric's spec (sample
and cell level), which is also what the index's `metrics` table holds; sample and set metrics are built
from their spec's `compute` path, so a family's heavy imports wait until it is scored.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from assess.errors import UnknownMetric
from assess.metrics.base import Outcome, SampleInput, SampleMetric, SetMetric
from render.compose.metric_registry import SPECS, MetricSpec, scored_metric_names


def metric_class(spec: MetricSpec) -> type[SampleMetric] | type[SetMetric]:
    """The compute class a sample or set metric's spec names ("module:Class")."""
    if spec.compute is None:
        raise UnknownMetric(f"{spec.name} is a cell-level metric: it is computed per cell, not per sample")
    module, _, name = spec.compute.partition(":")
    cls: type[SampleMetric] | type[SetMetric] = getattr(importlib.import_module(module), name)
    return cls


def build_metrics(names: list[str] | None = None, clip_model: str | None = None,
                  models: Mapping[str, str] | None = None) -> tuple[list[SampleMetric], list[SetMetric]]:
    """(sample metrics, set metrics) named (all when names is None); a typo lists the valid names.
    `models`: metric name -> the model it uses (`--metric-model`); `clip_model` is clip_score's."""
    valid = scored_metric_names()
    names = valid if names is None else names
    unknown = [n for n in names if n not in valid]
    if unknown:
        raise UnknownMetric(f"unknown metric(s): {', '.join(unknown)}. Valid metrics are: {', '.join(valid)}")
    bad = [m for m in (models or {}) if m not in valid]
    if bad:
        raise UnknownMetric(f"--metric-model {bad[0]}=...: no such metric. Valid metrics are: {', '.join(valid)}")
    chosen = {**(models or {}), **({"clip_score": clip_model} if clip_model else {})}
    built = [metric_class(SPECS[name]).from_options(chosen) for name in names]
    for metric in built:  # a local folder that cannot be the model: refused before anything is indexed
        source = getattr(metric, "metric_model", None)
        if source is not None:
            source.check_folder(metric.model_name, source.given_as(metric.model_name, chosen))  # type: ignore[union-attr]
    return ([m for m in built if isinstance(m, SampleMetric)], [m for m in built if isinstance(m, SetMetric)])


def build_sample_metrics(names: list[str] | None = None, clip_model: str | None = None,
                         models: Mapping[str, str] | None = None) -> list[SampleMetric]:
    """The sample metrics of `build_metrics`."""
    return build_metrics(names, clip_model, models)[0]


__all__ = ["SPECS", "MetricSpec", "Outcome", "SampleInput", "SampleMetric", "SetMetric", "build_metrics",
           "build_sample_metrics", "metric_class"]
