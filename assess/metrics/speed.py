"""Speed, per cell: from the samples' own measurements (samples.jsonl).

Warm latency excludes each process's first sample after (re)loading (`warmup: true`). GPU-seconds
spent count only what a run rendered: reused samples cost nothing.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from assess.metrics.base import Outcome
from assess.metrics.registry import (
    GPU_S, IMAGES_PER_S, LATENCY_MEDIAN, LATENCY_P90, LOAD_S, PEAK_MEM, S_PER_STEP,
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
    """Device seconds one run spent: latency of what it rendered + its load time."""
    rendered = [s for s in samples if not s.reused_from]
    latency = sum(s.latency_s or 0.0 for s in rendered)
    load = max((s.load_s or 0.0 for s in rendered), default=0.0)
    return latency + load


def cell_speed(samples: Sequence[SampleRow], gpu_s: float) -> dict[str, Outcome]:
    """Speed outcomes of one cell from its sample rows (index `samples` table) and spent gpu_s."""
    warm = [s for s in samples if not s["warmup"] and s["latency_s"] is not None]
    latencies = [float(s["latency_s"]) for s in warm]
    out: dict[str, Outcome] = {}
    detail = f"n_warm={len(latencies)}"
    if latencies:
        out[LATENCY_MEDIAN.name] = Outcome.of(statistics.median(latencies), detail)
        out[LATENCY_P90.name] = Outcome.of(percentile(latencies, 90), detail)
        total = sum(latencies)
        out[IMAGES_PER_S.name] = (
            Outcome.of(len(latencies) / total, detail)
            if total > 0
            else Outcome.unavailable("warm latencies sum to 0 s")
        )
    else:
        for spec in (LATENCY_MEDIAN, LATENCY_P90, IMAGES_PER_S):
            out[spec.name] = Outcome.unavailable(NO_WARM)
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
