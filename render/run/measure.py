"""How a job measures speed so that its figures survive a noisy machine (docs/timing.md).

- A **reference workload**: a short, fixed, seeded chain of matrix products on the job's device, timed at the
  start and at the end of every cell that renders (the end of one cell serves as the start of the next when
  nothing ran in between). Each sample records the reference time of its cell's start (`ref_s`), so latencies
  rendered in different jobs, on different nodes or hours apart compare as latency / ref_s; the cell's DONE.json
  records the reference at its start and end and their drift, the noise the reference saw while the cell ran.
- **Repeated warm calls** (`timing.repeats=N`): a warm sample is rendered N times in a row; its latency is the
  median and every call is kept (`latency_calls`), so the spread of the calls is measured, not guessed.

The reference says how fast the device was at that moment, for dense compute: it tracks a slower GPU clock, a
lower power cap or CPUs shared with another job, not a different memory bandwidth or PCIe link (limits: docs).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from render.errors import ConfigError

REPS = 5  # timed repetitions of the workload; the reference is their median (after one untimed warm-up)
CHAIN = 8  # matrix products per repetition
SIZE = {"cpu": 384, "cuda": 4096}  # square matrices: ~2.5 ms a repetition on 2 CPU cores (16 ms a reference), ~1-2 ms on a data-centre GPU
FRESH_S = 2.0  # a reference measured this recently (the previous cell's end) also serves as the next cell's start


@dataclass
class TimingConf:
    """`timing.*`: how speed is measured. Not part of the cell key: it changes no image."""

    repeats: int = 1  # pipeline calls per warm sample: its latency is their median, each call kept in latency_calls
    reference: bool = True  # time the reference workload at the start and end of each cell that renders
    side_by_side: bool = True  # a sweep ends by timing its cells and their anchor side by side (render.timing.sweep_round)
    side_by_side_share: float = 0.2  # ... within this share of the sweep's own time (at least the minimum rounds)


def check_timing(conf: Any) -> TimingConf:
    """`conf` (the config node, or None) as a checked TimingConf; ConfigError naming the bad value."""
    values = TimingConf(**dict(conf)) if conf is not None else TimingConf()
    if isinstance(values.repeats, bool) or not isinstance(values.repeats, int) or values.repeats < 1:
        raise ConfigError(f"timing.repeats={values.repeats!r}: expected an integer >= 1 (pipeline calls per warm sample)")
    for name in ("reference", "side_by_side"):
        if not isinstance(getattr(values, name), bool):
            raise ConfigError(f"timing.{name}={getattr(values, name)!r}: expected true or false")
    share = values.side_by_side_share
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise ConfigError(f"timing.side_by_side_share={share!r}: expected a fraction of the sweep's time in (0, 1] "
                          "(timing.side_by_side=false skips the round)")
    return values


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def reference_workload(device: str) -> float:
    """Seconds one repetition of the fixed workload takes on `device` now (median of REPS)."""
    import torch

    kind = "cuda" if device.startswith("cuda") else "cpu"
    dtype = torch.bfloat16 if kind == "cuda" else torch.float32
    generator = torch.Generator("cpu").manual_seed(0)
    # scaled so that repeated products neither overflow nor vanish
    a = (torch.randn(SIZE[kind], SIZE[kind], generator=generator) / SIZE[kind] ** 0.5).to(device, dtype)
    with torch.inference_mode():
        times = []
        for rep in range(REPS + 1):
            x = a
            _synchronize(device)
            start = time.perf_counter()
            for _ in range(CHAIN):
                x = x @ a
            _synchronize(device)
            if rep:  # the first repetition warms the kernels and caches up
                times.append(time.perf_counter() - start)
    return statistics.median(times)


class Clock:
    """The reference times of one process, by device: what `reference` measured last and when."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, float]] = {}  # device -> (monotonic time measured, seconds)

    def measure(self, device: str) -> float:
        seconds = reference_workload(device)
        self._last[device] = (time.monotonic(), seconds)
        return seconds

    def start(self, device: str) -> float:
        """The reference at a cell's start: the one just measured at the previous cell's end, else a new one."""
        last = self._last.get(device)
        if last is not None and time.monotonic() - last[0] < FRESH_S:
            return last[1]
        return self.measure(device)


CLOCK = Clock()  # process-level, like the pipeline cache


def drift(start_s: float, end_s: float) -> float:
    """Relative change of the reference over a cell: |end - start| / the faster of the two."""
    return abs(end_s - start_s) / min(start_s, end_s)
