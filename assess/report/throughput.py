"""The report's throughput table: each cell's images/s, GPU-s/image, peak memory and cost per 1,000 images at its
batch, from the one computation every screen reads (assess.statistics.cost)."""

from __future__ import annotations

from typing import Any, Sequence

from assess.statistics.cost import (RENDER_TIME, SIDE_BY_SIDE, Figure, Throughput, best, cell_throughput,
                                          median_figure)
from assess.statistics.width import cell_batch

__all__ = ["RENDER_TIME", "SIDE_BY_SIDE", "Figure", "Throughput", "best", "cell_throughput", "median_figure",
           "throughput_rows"]


def throughput_rows(index: Any, views: Sequence[Any], price_per_gpu_hour: float | None = None) -> list[dict[str, Any]]:
    """The report's throughput table (views: assess.report.write's CellView, each with label, cell_key, split, mark): one
    row per cell, most images per GPU-second first, the best one marked; [] when no cell is batched (every figure is
    then 1 / its latency, which the verdict table shows)."""
    if not any(cell_batch(index, v.cell_key) > 1 for v in views):
        return []
    figures = {v.cell_key: t for v in views if (t := cell_throughput(index, v.cell_key, v.split)) is not None}
    top = best(list(figures.values()))
    rows = []
    for v in sorted((v for v in views if v.cell_key in figures), key=lambda v: figures[v.cell_key].gpu_s_per_image.value):
        t = figures[v.cell_key]
        rows.append({"mark": v.mark, "label": v.label, "cell_key": v.cell_key, "batch": t.batch, "width": t.width,
                     "latency": t.latency.text(), "images_per_s": t.images_per_s.text(),
                     "gpu_s_per_image": t.gpu_s_per_image.text(),
                     "peak_mem": "n/a" if t.peak_mem_bytes is None else f"{t.peak_mem_bytes / 2**20:,.0f} MiB",
                     "cost": t.cost_per_1000(price_per_gpu_hour), "timed": f"{t.timed}, {t.n} call(s)",
                     "best": t is top})
    return rows
