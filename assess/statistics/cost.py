"""A cell's throughput and what an image costs the device: the one computation every screen reads.

A batched cell (render.cell: `batch=N`) renders N samples a pipeline call; every image of a call waits the call
(`latency_s`, the latency the verdicts rank), and each holds its share of it (latency / N). So per cell:

- images/s: how many images one replica of the cell renders per second, 1 / median share;
- GPU-s/image: the device time an image costs, median share x the cell's width (a parallel cell's GPUs);
- its peak memory, the largest any of its calls reached.

The figures come from the cell's latest complete side-by-side session when it has one (each round a full call of
its batch: render.timing.sessions), else from its warm render-time samples whose call held its full batch (each
record holds the size of the call that rendered it; a cell's last call may hold fewer), with a 95 % bootstrap
interval of the median. The verdict table's cost per 1,000 images, the answer's "most images per GPU-hour", the
report's throughput table and `assess fleet` all read `cell_throughput` (tests/test_batch.py holds them equal).
A leaf of assess's statistics: it imports nothing above it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from assess.statistics.width import cell_batch, cell_width

SIDE_BY_SIDE = "side by side"
RENDER_TIME = "render-time"


@dataclass(frozen=True)
class Figure:
    """A median and its 95 % interval (None: too few values)."""

    value: float
    low: float | None
    high: float | None

    def text(self, digits: int = 3) -> str:
        interval = f" [{self.low:.{digits}g}, {self.high:.{digits}g}]" if self.low is not None and self.high is not None else ""
        return f"{self.value:.{digits}g}{interval}"


@dataclass(frozen=True)
class Throughput:
    cell_key: str
    batch: int
    width: int
    latency: Figure  # s per call: what every image of the call waits
    images_per_s: Figure  # per replica of the cell (its width of GPUs)
    gpu_s_per_image: Figure
    peak_mem_bytes: int | None
    n: int  # calls (side by side: rounds) the figures are over
    timed: str  # SIDE_BY_SIDE or RENDER_TIME

    def cost_per_1000(self, price_per_gpu_hour: float | None = None) -> str:
        """GPU-hours per 1,000 images at the median (and money at a price per GPU-hour): the verdict table's figure."""
        return cost_text(self.gpu_s_per_image.value, price_per_gpu_hour)

    def as_dict(self) -> dict[str, Any]:
        return {"cell_key": self.cell_key, "batch": self.batch, "width": self.width, "timed": self.timed, "n": self.n,
                "latency_s": self.latency.value, "images_per_s": self.images_per_s.value,
                "images_per_s_low": self.images_per_s.low, "images_per_s_high": self.images_per_s.high,
                "gpu_s_per_image": self.gpu_s_per_image.value, "gpu_s_per_image_low": self.gpu_s_per_image.low,
                "gpu_s_per_image_high": self.gpu_s_per_image.high, "peak_mem_bytes": self.peak_mem_bytes}


def median_figure(values: Sequence[float]) -> Figure:
    """The median of `values` and its 95 % bootstrap interval, as every latency of the index has it
    (assess.metrics.speed.median_interval)."""
    import statistics

    from assess.metrics.speed import median_interval

    return Figure(statistics.median(values), *median_interval(values))


def cell_throughput(index: Any, cell_key: str, split: str | None = None) -> Throughput | None:
    """The cell's throughput figures (module doc), or None without a warm latency."""
    batch, width = cell_batch(index, cell_key), cell_width(index, cell_key)
    samples = index.samples_of(cell_key, split) if split else list(index.cell_samples(cell_key).values())
    rows = [r for r in samples if not r["warmup"] and r["latency_s"] is not None]
    peak = max((r["peak_mem_bytes"] for r in rows if r["peak_mem_bytes"] is not None), default=None)
    calls, timed = index.session_calls(cell_key), SIDE_BY_SIDE
    if not calls:
        full = [float(r["latency_s"]) for r in rows if (r["batch"] or 1) == batch] or [float(r["latency_s"]) for r in rows]
        # the samples of a call share its latency: counted once per call, not once per image
        calls, timed = (sorted(set(full)) if batch > 1 else full), RENDER_TIME
    if not calls:
        return None
    latency = median_figure(calls)
    share = Figure(latency.value / batch, *(None if x is None else x / batch for x in (latency.low, latency.high)))
    return Throughput(cell_key, batch, width, latency,
                      images_per_s=Figure(1 / share.value, *(None if x is None else 1 / x for x in (share.high, share.low))),
                      gpu_s_per_image=Figure(share.value * width, *(None if x is None else x * width
                                                                     for x in (share.low, share.high))),
                      peak_mem_bytes=peak, n=len(calls), timed=timed)


def best(figures: Sequence[Throughput]) -> Throughput | None:
    """The figures with the fewest GPU-seconds per image (the most images per GPU-hour)."""
    return min(figures, key=lambda t: t.gpu_s_per_image.value, default=None)


def cost_text(gpu_s_per_image: float | None, price: float | None) -> str:
    """GPU-hours per 1,000 images (and money at `price` per GPU-hour) at a cost of `gpu_s_per_image` device seconds an
    image (cell_throughput's figure: a parallel cell's share times its width, a batched cell's call over its batch)."""
    if gpu_s_per_image is None:
        return "n/a"
    gpu_h = gpu_s_per_image * 1000 / 3600
    money = f" · {price * gpu_h:,.2f}/1k" if price is not None else ""
    return f"{gpu_h:.3g} GPU-h{money}"
