"""What a tracker must hold for a sweep's cell, from the index by the report's own code, and the report's own
text of its numbers (what a user compares the tracker with)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assess.export.selection import cell_metrics, metric_versions, param_name
from assess.index.database import Index
from assess.report.write import _interval_text, sweep_cells
from assess.statistics.compare import Estimate


def report_views(sweep: Path, db: Path) -> dict[str, Any]:
    """cell key -> the report's CellView of the sweep."""
    with Index.open(db, create=False) as index:
        views, _ = sweep_cells(index, [sweep])
    return {v.cell_key: v for v in views}


def expected_params(view: Any) -> dict[str, str]:
    return {**{param_name(k): str(v) for k, v in view.axes.items()}, "cell_key": view.cell_key, "split": view.split,
            "anchor_cell_key": view.anchor_cell_key,
            **{f"metric_version/{n}": str(v) for n, v in metric_versions(list(view.values)).items()}}


def expected_metrics(view: Any) -> dict[str, float]:
    return cell_metrics(view)


def interval_text(metrics: dict[str, float], name: str) -> str:
    """The report's text of a tracked estimate (assess.report.write._interval_text), e.g. `1.9 [1.2, 2.3]`."""
    return _interval_text(Estimate(metrics[name], metrics.get(f"{name}/low"), metrics.get(f"{name}/high"),
                                   int(metrics[f"{name}/n"])))


def check_against_report(metrics: dict[str, float], view: Any, html: str, cells_row: dict[str, Any]) -> None:
    """The tracked numbers are the report's (its leaderboard's text) and the index's (`cells` view)."""
    assert metrics["samples"] == view.n_samples == cells_row["n_samples"]
    for name in ("psnr", "ssim", "latency_median_s", "images_per_s", "gpu_s"):
        if cells_row[name] is not None:
            assert abs(metrics[name] - cells_row[name]) < 1e-9 * max(1.0, abs(cells_row[name])), name
    if view.is_anchor:
        assert "speedup" not in metrics and "psnr" not in metrics  # the anchor is the reference
        return
    assert f"{interval_text(metrics, 'speedup')}×" in html
    for name in ("psnr/mean", "ssim/mean"):
        assert interval_text(metrics, name) in html, name


def cells_rows(db: Path) -> dict[str, dict[str, Any]]:
    with Index.open(db, create=False) as index:
        return {r["cell_key"]: r for r in index.query("SELECT * FROM cells")}
