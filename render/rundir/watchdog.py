"""The watchdog: is a running cell's projected time past twice its estimate?

The renderer warns (terminal and render.log) and `assess status` flags the cell; nothing is killed.
One function serves both, from run.json (its `estimate`) and the cell's sample records.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from render.rundir.records import SampleRecord, parse_time
from render.rundir.run_record import RunRecord

FACTOR = 2.0
MIN_EXCESS_S = 5.0  # below this, a slow cell is noise (a warm-up, a short cell), not a stall


@dataclass(frozen=True)
class Projection:
    estimate_s: float  # what the pending samples were expected to take
    projected_s: float  # what they will take at the pace so far
    source: str  # history | first-sample

    @property
    def overdue(self) -> bool:
        return self.projected_s > FACTOR * self.estimate_s and self.projected_s - self.estimate_s > MIN_EXCESS_S

    def message(self) -> str:
        return (f"projected {self.projected_s:.0f} s for its pending samples against an estimate of {self.estimate_s:.0f} s "
                f"({self.projected_s / max(self.estimate_s, 1e-9):.1f}x, estimate from {self.source}); nothing was stopped")



def project(run: RunRecord, samples: Sequence[SampleRecord], now: datetime | None) -> Projection | None:
    """The projection of a running cell from its warm samples (the first after a load is a warm-up and not
    counted), or None before the first warm sample: load and warm-up times are not projected. `now` None: taken
    right after a sample finished (the renderer's own check), so no sample is in progress; else the time since the
    last one (records say it to the second) counts as a sample that may be stalling."""
    estimate = run.estimate
    n_pending = int(estimate.get("n_pending") or 0)
    started = parse_time(run.started_at)
    if n_pending <= 0 or started is None:
        return None
    rendered = [s for s in samples if s.reused_from is None and (parse_time(s.finished_at) or started) >= started]
    warm = [s.latency_s for s in rendered if not s.warmup and s.latency_s]
    if not warm:
        return None
    per_sample, source = estimate.get("s_per_sample"), "history"
    if not per_sample:
        per_sample, source = warm[0], "first-sample"
    finished = [t for t in (parse_time(s.finished_at) for s in rendered) if t is not None]
    last = max(finished, default=started)
    in_progress = max((now - last).total_seconds(), 0.0) if now is not None else 0.0  # a sample rendering now
    pace = max(sum(warm) / len(warm), in_progress)
    return Projection(float(per_sample) * n_pending, pace * n_pending, source)
