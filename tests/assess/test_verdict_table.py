"""Issue 30, item 4: the first screen decides. Both reports open with a verdict table (each cell as its overrides,
its verdict, speed-up with interval and how it was timed, the quality delta with interval, the lossless floor, the
cost per 1,000 images) that fits a 1280x800 window with no horizontal scroll, measured in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from assess.index.database import Index
from assess.report.write import pareto_figure, sweep_cells, write_report
from assess.scoring.ingest import score
from assess.statistics.compare import compare_cell
from tests.assess.climb_fixtures import DemoRuns, restore_hydra  # noqa: F401  (the fixture)
from tests.assess.conftest import RunFactory, cell_key_of, make_cell, noise, shift

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WINDOW = (1280, 800)


class Tables(HTMLParser):
    """The ids of the tables in document order, and the verdict table's rows (their cells' texts)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[str] = []
        self.rows: list[dict] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "table":
            self.tables.append(a.get("id") or "")
        elif tag == "tr" and "data-verdict-key" in a:
            self.rows.append({"key": a["data-verdict-key"], "verdict": a["data-verdict"], "cells": []})
        elif tag == "td" and self.rows and self.tables[-1] == "verdict-table":
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.rows[-1]["cells"].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables(html: Path) -> Tables:
    parsed = Tables()
    parsed.feed(html.read_text())
    return parsed


@pytest.fixture
def grid(outputs: RunFactory) -> Path:
    """A 2 x 2 sweep (steps x cache) with its anchor, one cell (steps=16 cache=none) close to it."""
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor", overrides=["steps=28", "cache=none"], latency=0.2)
    n = 1
    for steps in (8, 16):
        for cache in ("none", "fbcache"):
            outputs.run(sweep, f"{n}_steps={steps},cache={cache}", make_cell(steps=steps, cache=cache),
                        overrides=[f"steps={steps}", f"cache={cache}"], perturb=shift(28 - steps) if cache == "none"
                        else noise(28 - steps), latency=0.2 * steps / 28 * (0.7 if cache == "fbcache" else 1))
            n += 1
    return sweep


@pytest.fixture
def report(grid: Path, db: Path) -> Path:
    score([grid], db, metrics=["psnr", "ssim"])
    return write_report([grid], db, band=0.05, price_per_gpu_hour=2.5)


def test_the_sweep_report_opens_with_the_verdict_table(report: Path, grid: Path, db: Path) -> None:
    parsed = tables(report)
    assert parsed.tables[0] == "verdict-table"
    html = report.read_text()
    assert html.index('id="verdict-table"') < html.index('id="leaderboard"')
    with Index.open(db, create=False) as index:
        views, _ = sweep_cells(index, [grid])
        by_key = {v.cell_key: v for v in views}
        assert [r["key"] for r in parsed.rows] == [v.cell_key for v in views]  # every cell, leaderboard order
        for r in parsed.rows:
            view = by_key[r["key"]]
            mark, label, verdict, speed, timed, delta, floor, cost = r["cells"]
            assert mark == view.mark
            if view.is_anchor:
                assert label.startswith("★ anchor") and verdict == "anchor"
                continue
            assert label == " ".join(o for o in view.overrides if not o.startswith(("prompts", "seed")))  # its overrides
            assert verdict == r["verdict"] in {"parity", "out", "undecided"}
            speedup = compare_cell(index, view.cell_key, view.anchor_cell_key, view.split, view.keys).speedup
            assert speedup is not None and speed.startswith(f"{speedup.value:.2f}× [{speedup.low:.2f}, ")
            assert timed in ("timed apart", "timed apart ⚠ noisy")
            assert re.fullmatch(r"[+-]\d\.\d{4} \[[+-]\d\.\d{4}, [+-]\d\.\d{4}\]", delta), delta
            assert floor == "not measured"
            gpu_h = view.values["latency_median_s"] * 1000 / 3600
            assert cost == f"{gpu_h:.3g} GPU-h · {2.5 * gpu_h:,.2f}/1k"
    assert 'id="anchor-config"' in html and "<details" in html  # the anchor's config, collapsed
    assert "non-inferiority: no worse than -0.05 at alpha 0.05" in html


def test_reasons_for_missing_metrics_are_one_line_each(grid: Path, db: Path) -> None:
    summary = score([grid], db, metrics=["psnr", "ssim", "lpips"])  # LPIPS's weights are not at hand offline
    assert [line for line in summary.lines() if "lpips" in line] == [
        line for line in summary.lines() if "unavailable" in line]  # one line for the metric
    html = write_report([grid], db).read_text()
    items = re.findall(r'<li class="not-shown"[^>]*>(.*?)</li>', html, re.S)
    assert any("lpips" in item for item in items)
    assert all("\n" not in item and len(re.sub("<[^>]+>", "", item)) < 200 for item in items)


def test_the_pareto_plot_has_interval_bars(grid: Path, db: Path) -> None:
    score([grid], db, metrics=["psnr", "ssim"])
    with Index.open(db, create=False) as index:
        views, _ = sweep_cells(index, [grid])
    fig, _ = pareto_figure(views, "ssim")
    ax = fig.axes[0]
    bars = [c for c in ax.containers if c.__class__.__name__ == "ErrorbarContainer"]
    assert bars, "no interval bars"


def _browser(page: Path, tmp_path: Path) -> dict[str, str]:
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
             "--virtual-time-budget=10000"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", dom.stdout)
    assert body, dom.stdout[:2000]
    return dict(re.findall(r'(data-[\w-]+)="([^"]*)"', body.group(1)))


def fits_the_first_screen(attrs: dict[str, str]) -> None:
    width, height = (int(v) for v in attrs["data-window"].split("x"))  # the viewport of a 1280x800 window
    assert width == WINDOW[0] and height <= WINDOW[1], attrs["data-window"]
    left, top, right, bottom = (int(v) for v in attrs["data-verdict-box"].split(","))
    assert 0 <= left and right <= width, f"the verdict table spans x {left}..{right} of a {width}-px viewport"
    assert 0 <= top and bottom <= height, f"the verdict table spans y {top}..{bottom} of a {height}-px viewport"
    assert attrs["data-verdict-scroll"] == "0", "the page scrolls horizontally"


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install -y chromium)")
def test_the_sweep_reports_verdict_table_fits_1280x800(report: Path, tmp_path: Path) -> None:
    fits_the_first_screen(_browser(report, tmp_path))


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install -y chromium)")
def test_the_browser_check_catches_a_table_too_wide(report: Path, tmp_path: Path) -> None:
    """The check itself can fail: a table wider than the window must be caught."""
    html = report.read_text()
    wide = html.replace('<table id="verdict-table">', '<table id="verdict-table" style="width:1500px">', 1)
    report.write_text(wide)
    with pytest.raises(AssertionError):
        fits_the_first_screen(_browser(report, tmp_path))


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.usefixtures("restore_hydra")
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install -y chromium)")
def test_the_experiment_reports_verdict_table_fits_1280x800(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assess.climb.experiment_report import write_experiment_report
    from tests.assess.test_climb_index import first_generation

    monkeypatch.chdir(tmp_path)
    db = tmp_path / "index.db"
    first_generation(DemoRuns((tmp_path / "outputs").resolve()), db)
    page = write_experiment_report("tiny-demo", db)
    parsed = tables(page)
    assert parsed.tables[0] == "verdict-table" and len(parsed.rows) >= 3
    assert {r["verdict"] for r in parsed.rows[1:]} <= {"parity", "out", "undecided", "no-data"}
    assert all(r["cells"][4].startswith("timed apart") for r in parsed.rows[1:])
    fits_the_first_screen(_browser(page, tmp_path))


@pytest.fixture(scope="module")
def demo_generation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny-demo's first climb generation rendered (by hand) and scored, once for the tests below (~40 s on two busy
    cores): the folder its index.db lies in, where the climb's tests run."""
    from tests.assess.climb_fixtures import hydra_state_kept
    from tests.assess.test_climb_index import first_generation

    root = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as patch, hydra_state_kept():
        patch.chdir(root)
        first_generation(DemoRuns((root / "outputs").resolve()), root / "index.db")
    return root


@pytest.mark.usefixtures("restore_hydra")
def test_the_frontier_plot_has_interval_bars_and_no_label_over_another(demo_generation: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from assess.climb.experiment_report import _current_decision, frontier_figure
    from assess.experiment import load_experiment

    monkeypatch.chdir(demo_generation)
    db = demo_generation / "index.db"
    exp = load_experiment("tiny-demo", strict=False)
    with Index.open(db, create=False) as index:
        _, decision, _ = _current_decision(index, exp)
    fig = frontier_figure(exp, decision, None)
    ax = fig.axes[0]
    assert [c for c in ax.containers if c.__class__.__name__ == "ErrorbarContainer"]
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) >= 1 and not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_a_parallel_cell_shows_its_speedup_per_gpu_and_its_scaling_efficiency() -> None:
    """Issue 33 item 4: the width is read from the indexed cell; the per-GPU figure is the speed-up over the width."""
    import json

    from assess.statistics.compare import Estimate
    from assess.statistics.width import cell_width, twin_of
    from assess.verdicts.table import Speed
    from render.rundir import cell_key_of

    class OneRun:
        def __init__(self, cell: dict | None) -> None:
            self.cell = cell

        def query(self, sql: str, args: tuple) -> list[dict]:
            return [] if self.cell is None else [{"cell": json.dumps(self.cell)}]

    ulysses = {"parallel": {"name": "ulysses", "ulysses_degree": 2, "ring_degree": 1, "tp_degree": 1}}
    assert (cell_width(OneRun(ulysses), "k"), cell_width(OneRun({}), "k"), cell_width(OneRun(None), "k")) == (2, 1, 1)
    assert twin_of(OneRun(ulysses), "k") == cell_key_of({}) and twin_of(OneRun({}), "k") is None
    # per GPU: the speed-up over the anchor over the width; scaling efficiency: the speed-up over the width-1 twin
    # (before, the anchor's speed-up over the width was called the scaling efficiency: 80 % below, for a cell whose
    # split gained 1.2x, 60 %)
    wide = Speed(Estimate(1.6, 1.5, 1.7, 8), "timed apart", gpus=2, over_twin=Estimate(1.2, 1.1, 1.3, 8),
                 twin_timed="side by side")
    assert wide.per_gpu() == ("2 GPUs: 0.80× per GPU, 60 % scaling efficiency (1.20× over its width-1 twin, "
                              "side by side)")
    untwinned = Speed(Estimate(1.6, 1.5, 1.7, 8), "timed apart", gpus=2)
    assert untwinned.per_gpu() == "2 GPUs: 0.80× per GPU, scaling efficiency n/a (its width-1 twin has no warm latency)"
    assert Speed(Estimate(1.6, 1.5, 1.7, 8), "timed apart").per_gpu() == ""


@pytest.mark.usefixtures("restore_hydra")
def test_the_experiment_verdict_table_is_the_anchor_then_each_climb_cell_at_its_rung_with_the_climbs_own_verdict(
        demo_generation: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """experiment_verdict called directly: before, only the slow tier's browser test reached it."""
    from assess.climb.experiment_report import _current_decision
    from assess.experiment import load_experiment
    from assess.verdicts.table import differing, experiment_verdict

    monkeypatch.chdir(demo_generation)
    exp = load_experiment("tiny-demo", strict=False)
    with Index.open(demo_generation / "index.db", create=False) as index:
        observed, decision, _ = _current_decision(index, exp)
        table = experiment_verdict(index, exp, decision, observed)
        what_if = experiment_verdict(index, exp, decision, observed, what_if_band=0.5)
    anchor, *cells = table["rows"]
    assert (anchor["mark"], anchor["is_anchor"], anchor["verdict"], anchor["cell_key"]) == \
        ("A", True, "anchor", observed.anchor_key)
    assert table["anchors"] == [{"mark": "A", "cell_key": observed.anchor_key, "config": " ".join(
        f"{k}={v}" for k, v in exp.anchor.items()) + f" (model={exp.model})"}]
    assert "coords" not in anchor and sorted(c["coords"] for c in cells) == sorted(decision.current)
    labels = dict(zip(decision.current, differing([[f"{a}={v}" for a, v in zip(exp.axes, c, strict=True)]
                                                   for c in decision.current]), strict=True))
    for i, c in enumerate(cells):
        e = decision.current[c["coords"]]
        assert c["mark"] == ("*" if c["coords"] == decision.incumbent else "") + str(i + 1)
        assert c["label"] == " ".join(labels[c["coords"]]) + f" (rung {e.rung})"
        assert (c["verdict"], c["n_prompts"], c["cell_key"]) == (str(e.verdict), e.n, observed.keys[c["coords"]])
    speeds = [c["speed_value"] for c in cells]
    assert None not in speeds and speeds == sorted(speeds, reverse=True)  # all timed apart: the fastest first
    assert table["what_if"] is None and what_if["what_if"] is not None and "0.5" in what_if["what_if"]
    assert all(c["what_if"] in {"parity", "out", "undecided", "no data"} for c in what_if["rows"][1:])


def test_a_cell_that_did_the_same_work_as_another_is_labelled_with_the_others_overrides_or_the_anchors_key(
        outputs: RunFactory, db: Path) -> None:
    from assess.report.write import sweep_cells
    from assess.verdicts.table import Rule, sweep_verdict
    from tests.assess.conftest import ANCHOR_KEY

    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor", overrides=["attention=native"], latency=0.2)
    outputs.run(sweep, "1_attention=sdpa", make_cell(attention="sdpa"), overrides=["attention=sdpa"])  # the anchor's pixels
    outputs.run(sweep, "2_attention=flash", make_cell(attention="flash"), overrides=["attention=flash"],
                perturb=shift(2), latency=0.15)
    outputs.run(sweep, "3_attention=xformers", make_cell(attention="xformers"), overrides=["attention=xformers"],
                perturb=shift(2), latency=0.16)  # the flash cell's pixels
    score([sweep], db, metrics=["ssim"])
    with Index.open(db, create=False) as index:
        views, _ = sweep_cells(index, [sweep])
        table = sweep_verdict(index, views, Rule("ssim", 0.05))
    labels = {r["cell_key"]: r["label"] for r in table["rows"] if not r["is_anchor"]}
    assert labels[cell_key_of(make_cell(attention="sdpa"))] == f"attention=sdpa (same work as {ANCHOR_KEY[:12]})"
    assert labels[cell_key_of(make_cell(attention="xformers"))] == "attention=xformers (same work as attention=flash)"
    assert labels[cell_key_of(make_cell(attention="flash"))] == "attention=flash"
    for r in table["rows"][1:]:  # each cell's delta to the anchor, its interval and its verdict
        assert r["quality"][0]["text"] != "n/a" and r["n_prompts"] == 4 and r["verdict"] in {"parity", "out"}
        assert r["speed_value"] is not None and r["timed"].startswith("timed apart")
