"""A report read at a glance: Pareto labels that never overlap, a legend for them, a runnable line per row."""

from __future__ import annotations

import itertools

from assess.report.write import CellView, pareto_figure, render_line


def _view(i: int, speed: float, ssim: float, anchor: bool = False) -> CellView:
    overrides = ["model=tiny", f"steps={i}", "cache=fbcache", "cache.threshold=0.05", "scheduler=dpmpp-2m"]
    return CellView(cell_key=f"k{i:02d}", split="smoke", anchor_cell_key="k00", is_anchor=anchor, status="done",
                    n_samples=4, n_expected=4, overrides=overrides, values={"latency_median_s": 1 / speed, "ssim": ssim},
                    reasons={}, label=" ".join(overrides), mark="A" if anchor else str(i))


def test_pareto_labels_do_not_overlap_when_cells_sit_close_together() -> None:
    views = [_view(0, 10.0, 1.0, anchor=True)]
    views += [_view(i, 20.0 + 0.01 * i, 0.99 - 0.0001 * i) for i in range(1, 13)]  # one dense cluster
    views += [_view(13, 30.0, 0.95), _view(14, 30.05, 0.9501)]
    fig, legend = pareto_figure(views, "ssim")
    renderer = fig.canvas.get_renderer()
    labels = fig.axes[0].texts
    boxes = [t.get_window_extent(renderer) for t in labels]
    assert not [(a.get_text(), b.get_text()) for (a, ba), (b, bb) in itertools.combinations(zip(labels, boxes), 2)
                if ba.overlaps(bb)]
    shown = sorted(m for t in labels for m in t.get_text().split(","))
    assert shown == sorted(v.mark for v in views)  # every point is named, once
    assert [item["mark"] for item in legend] == [v.mark for v in views]
    assert all(len(t.get_text()) < 40 for t in labels)  # short marks, not the override lines


def test_a_plot_of_thousands_of_cells_marks_its_frontier_and_anchor_only() -> None:
    """Past MAX_LABELLED points every label would merge into one that hides the plot (and placing them grew with the
    square of the points): the frontier and the anchor are marked, the legend still maps every mark."""
    from assess.report import write as report

    views = [_view(0, 10.0, 1.0, anchor=True)]
    views += [_view(i, 20.0 + (i * 7919 % 1000) / 100, 0.9 + (i * 104729 % 1000) / 10_000)
              for i in range(1, report.MAX_LABELLED + 50)]
    fig, legend = pareto_figure(views, "ssim")
    shown = {m for t in fig.axes[0].texts for m in t.get_text().split(",")}
    assert "A" in shown and 1 < len(shown) < len(views) // 4
    assert len(legend) == len(views)


def test_every_row_has_the_line_that_renders_its_samples() -> None:
    line = render_line(["model=tiny", "steps=4", "seed=42", "prompts.limit=2", "tag=a b"],
                       ["prompts=smoke", "prompts.limit=2"], {("smoke-000", 42), ("smoke-001", 42)})
    assert line == "python -m render model=tiny steps=4 'tag=a b' prompts=smoke prompts.limit=2 seed=42"
    assert render_line(["steps=8"], ["prompts=dev"], {("p", 0), ("p", 1)}).endswith("prompts=dev 'seed=[0,1]'")


def test_the_report_and_the_climb_draw_speed_on_one_axis() -> None:
    """The two speed-vs-quality plots once disagreed (images/s against s/image): both take assess.statistics.speed_axis."""
    import inspect

    import assess.climb.experiment_report as climb_report
    import assess.report.write as report
    from assess.statistics import speed_axis

    fig, _ = pareto_figure([_view(0, 10.0, 1.0, anchor=True), _view(1, 20.0, 0.98)], "ssim")
    assert fig.axes[0].get_xlabel() == speed_axis.LABEL
    assert "speed_axis.label(exp.objective)" in inspect.getsource(climb_report.frontier_figure)
    assert speed_axis.label("latency") == speed_axis.LABEL  # the climb's default objective: the report's axis
    assert speed_axis.label("gpu_seconds").startswith("median warm GPU-seconds")
    assert speed_axis.frontier([(0.1, 0.9), (0.2, 0.95), (0.3, 0.9)], quality_higher=True) == [0, 1]
    assert "images_per_s" not in inspect.getsource(report.pareto_figure)
