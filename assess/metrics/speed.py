"""Speed, per cell: from the samples' own measurements (samples.jsonl), with intervals and a noise figure.

Warm latency excludes each process's first sample after (re)loading (`warmup: true`). GPU-seconds
spent count only what a run rendered (every repeated call included): reused samples cost nothing.

The median warm latency, images/s and s/step carry a 95 % bootstrap interval over the warm samples; the noise
figure and the noisy flag are assess.statistics.noise's.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from assess.metrics.base import Outcome
from assess.statistics.noise import noise, normalised
from render.compose.metric_registry import (
    GPU_S, IMAGES_PER_S, LATENCY_MEDIAN, LATENCY_P90, LATENCY_REF, LOAD_S, PEAK_MEM, S_PER_STEP, SPEED_NOISE,
)


class SampleRow(Protocol):
    """A sample row by column name: a dict, or the index's sqlite3.Row."""

    def __getitem__(self, column: str, /) -> Any: ...


NO_WARM = "no warm sample (each process's first sample is warmup); render more prompts or seeds"


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), without numpy."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def run_gpu_s(samples: Iterable[Any]) -> float:
    """Device seconds one run spent: every call of what it rendered + its load time."""
    rendered = [s for s in samples if not s.reused_from]
    latency = sum(s.device_s for s in rendered)
    load = max((s.load_s or 0.0 for s in rendered), default=0.0)
    return latency + load


def median_interval(values: Sequence[float]) -> tuple[float | None, float | None]:
    """The median's 95 % percentile bootstrap interval: scipy.stats.bootstrap's (assess.statistics.compare.bootstrap), its steps
    without its per-call checks (assess.statistics.resample: the same values to the last bit; a report computes two a cell)."""
    from assess.statistics.memo import remembered
    from assess.statistics.resample import median_interval_percentile
    from assess.statistics.compare import CONFIDENCE, N_RESAMPLES, SEED

    if len(values) < 2:
        return None, None
    if min(values) == max(values):
        return values[0], values[0]
    data = list(values)
    return remembered("median", SEED, (data,), lambda: median_interval_percentile(data, CONFIDENCE, N_RESAMPLES, SEED))


def cell_speed(samples: Sequence[SampleRow], gpu_s: float, drifts: Iterable[float | None] = ()) -> dict[str, Outcome]:
    """Speed outcomes of one cell from its sample rows (index `samples` table), spent gpu_s and the reference
    drift of each run that rendered them."""
    warm = [s for s in samples if not s["warmup"] and s["latency_s"] is not None]
    latencies = [float(s["latency_s"]) for s in warm]
    out: dict[str, Outcome] = {}
    detail = f"n_warm={len(latencies)}"
    if latencies:
        median = statistics.median(latencies)
        low, high = median_interval(latencies)
        out[LATENCY_MEDIAN.name] = Outcome.of(median, detail, low, high)
        out[LATENCY_P90.name] = Outcome.of(percentile(latencies, 90), detail)
        total = sum(latencies)
        out[IMAGES_PER_S.name] = (
            Outcome.of(len(latencies) / total, detail, 1 / high if high else None, 1 / low if low else None)
            if total > 0
            else Outcome.unavailable("warm latencies sum to 0 s")
        )
        steps = {s["steps"] for s in warm}
        if len(steps) == 1 and next(iter(steps)):
            n = next(iter(steps))
            out[S_PER_STEP.name] = Outcome.of(median / n, detail, low / n if low is not None else None,
                                              high / n if high is not None else None)
        relative = normalised(warm)
        if relative is not None:
            rel_low, rel_high = median_interval(relative)
            out[LATENCY_REF.name] = Outcome.of(statistics.median(relative), detail, rel_low, rel_high)
        else:
            out[LATENCY_REF.name] = Outcome.unavailable("not every warm sample records its job's reference timing "
                                                        "(rendered before render.run.measure, or timing.reference=false)")
        figure = noise(warm, drifts)
        out[SPEED_NOISE.name] = (Outcome.of(figure.figure, figure.reason()) if figure.figure is not None
                                 else Outcome.unavailable(figure.reason()))
    else:
        for spec in (LATENCY_MEDIAN, LATENCY_P90, IMAGES_PER_S, LATENCY_REF, SPEED_NOISE):
            out[spec.name] = Outcome.unavailable(NO_WARM)
    if S_PER_STEP.name not in out:
        per_step = [
            float(s["s_per_step"]) if s["s_per_step"] is not None else float(s["latency_s"]) / s["steps"]
            for s in warm
            if s["s_per_step"] is not None or s["steps"]
        ]
        out[S_PER_STEP.name] = (
            Outcome.of(statistics.median(per_step), detail) if per_step else Outcome.unavailable(NO_WARM)
        )
    mems = [(int(s["peak_mem_bytes"]), s["mem_kind"]) for s in samples if s["peak_mem_bytes"] is not None]
    if mems:
        kinds = sorted({str(kind) for _, kind in mems})
        out[PEAK_MEM.name] = Outcome.of(max(m for m, _ in mems), detail=",".join(kinds))
    else:
        out[PEAK_MEM.name] = Outcome.unavailable("samples record no peak_mem_bytes")
    loads = [float(s["load_s"]) for s in samples if not s["reused_from"] and s["load_s"] is not None]
    out[LOAD_S.name] = (
        Outcome.of(max(loads)) if loads else Outcome.unavailable("no rendered sample records load_s (all reused?)")
    )
    out[GPU_S.name] = Outcome.of(gpu_s)
    return out
