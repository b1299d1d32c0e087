"""Statistics against the anchor: bootstrap intervals, Wilcoxon p-values, speed-up."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from assess.index.database import Index
from assess.scoring.ingest import score
from assess.statistics.compare import compare_cell, mean_interval, paired_delta, per_prompt, speedup, wilcoxon_p
from tests.assess.conftest import ANCHOR_KEY, cell_key_of, expected_psnr_shift, make_cell


def test_mean_interval_covers_the_mean_and_is_reproducible() -> None:
    data = np.random.default_rng(1).normal(10.0, 2.0, size=40)
    first, second = mean_interval(data), mean_interval(data)
    assert first == second
    assert first.low < 10.0 < first.high
    assert first.low < first.value < first.high
    assert first.high - first.low < 2.0


def test_degenerate_intervals() -> None:
    assert mean_interval([3.0, 3.0, 3.0]).low == mean_interval([3.0, 3.0, 3.0]).high == 3.0
    one = mean_interval([3.0])
    assert (one.low, one.high, one.note) == (None, None, "one value: no interval")


def test_paired_delta_averages_seeds_per_prompt_first() -> None:
    anchor = {(f"p{i}", s): float(i) for i in range(10) for s in (0, 1)}
    cell = {(f"p{i}", s): float(i) + 1.0 + (0.5 if s else -0.5) for i in range(10) for s in (0, 1)}
    delta = paired_delta(cell, anchor)
    assert delta.value == pytest.approx(1.0)
    assert delta.n == 10
    assert (delta.low, delta.high) == (pytest.approx(1.0), pytest.approx(1.0))
    assert delta.p_value == pytest.approx(0.001953125)  # exact two-sided Wilcoxon, n=10, all positive


def test_paired_delta_of_no_difference() -> None:
    values = {(f"p{i}", 0): float(i) for i in range(5)}
    delta = paired_delta(values, values)
    assert delta.value == 0.0 and delta.p_value is None and "all differences are 0" in delta.note
    assert paired_delta(values, {}) is None


def test_wilcoxon_on_noise_is_not_significant() -> None:
    diffs = np.random.default_rng(3).normal(0, 1, size=30)
    p, note = wilcoxon_p(list(diffs))
    assert p is not None and p > 0.05 and note is None


def test_per_prompt() -> None:
    assert per_prompt({("a", 0): 1.0, ("a", 1): 3.0, ("b", 0): 5.0}) == {"a": 2.0, "b": 5.0}


def test_speedup_interval() -> None:
    rng = np.random.default_rng(0)
    anchor = rng.normal(0.2, 0.005, size=20)
    cell = rng.normal(0.05, 0.002, size=20)
    est = speedup(anchor, cell)
    assert est.value == pytest.approx(np.median(anchor) / np.median(cell))
    assert est.low < est.value < est.high
    assert 3.5 < est.low and est.high < 4.5
    assert speedup([0.2], [0.1]).low is None
    assert speedup([], [0.1]) is None


def test_the_speedup_interval_is_scipys_two_sample_bootstrap_with_the_anchor_drawn_once() -> None:
    """assess.statistics.compare.median_ratio_interval keeps the anchor's resampled medians across cells (issue 45: a report of
    5,000 cells drew them 5,000 times); its intervals are scipy.stats.bootstrap's, to the last bit."""
    import warnings

    from scipy import stats as scipy_stats

    from assess.statistics.compare import CONFIDENCE, N_RESAMPLES, SEED, median_ratio_interval

    def ratio(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(x, axis=axis) / np.median(y, axis=axis)

    rng = np.random.default_rng(1)
    anchor = rng.normal(0.2, 0.01, size=150)
    for cell in (rng.normal(0.05, 0.002, size=19), rng.normal(0.1, 0.01, size=7), np.full(5, 0.1), anchor[:3]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = scipy_stats.bootstrap((anchor, cell), ratio, confidence_level=CONFIDENCE, n_resamples=N_RESAMPLES,
                                          method="percentile", vectorized=True, rng=np.random.default_rng(SEED))
        interval = found.confidence_interval
        assert median_ratio_interval(anchor, cell) == (float(interval.low), float(interval.high))


def test_compare_cell_from_the_index(sweep_with_anchor: Path, db: Path) -> None:
    score([sweep_with_anchor], db, metrics=["psnr"])
    steps8 = cell_key_of(make_cell(steps=8))
    with Index.open(db) as index:
        comparison = compare_cell(index, steps8, ANCHOR_KEY, "smoke")
    assert comparison.kinds["psnr"] == "mean"
    assert comparison.metrics["psnr"].value == pytest.approx(expected_psnr_shift(10), rel=1e-9)
    assert comparison.speedup.value == pytest.approx(0.2 / 0.05, rel=0.01)


# compare.py's functions called directly (mutation testing, docs/testing.md)

def _clip_scores(index: Index, cell_key: str, value: float) -> None:
    """Index a non-reference metric (clip_score) of `value` for each sample of the cell, as `assess score` would."""
    from assess.index.database import ScoreRow
    from assess.metrics import SPECS
    from assess.metrics.base import Outcome

    rows = [ScoreRow(cell_key, r["prompt_sha"], r["prompt_id"], r["seed"], SPECS["clip_score"], Outcome.of(value),
                     config="clip-model") for r in index.samples_of(cell_key, "smoke")]
    with index.write() as conn:
        index.write_scores(conn, rows)


def test_a_metric_without_a_reference_is_compared_as_a_paired_delta_to_the_anchors_and_one_with_as_a_mean(
        sweep_with_anchor: Path, db: Path) -> None:
    from assess.statistics.compare import quality_deltas

    score([sweep_with_anchor], db, metrics=["ssim"])
    steps8 = cell_key_of(make_cell(steps=8))
    with Index.open(db) as index:
        assert quality_deltas(index, steps8, ANCHOR_KEY, "smoke", "clip_score") == {}  # neither side scored on it
        _clip_scores(index, steps8, 0.26)
        assert quality_deltas(index, steps8, ANCHOR_KEY, "smoke", "clip_score") == {}  # the anchor has none
        _clip_scores(index, ANCHOR_KEY, 0.30)
        prompts = {r["prompt_sha"] for r in index.samples_of(steps8, "smoke")}
        assert quality_deltas(index, steps8, ANCHOR_KEY, "smoke", "clip_score") == \
            {p: pytest.approx(-0.04) for p in prompts} and len(prompts) == 4
        comparison = compare_cell(index, steps8, ANCHOR_KEY, "smoke")
    assert comparison.kinds == {"ssim": "mean", "clip_score": "delta"}
    assert comparison.metrics["clip_score"].value == pytest.approx(-0.04)


def _with_reference_drift(run: Path, drift: float) -> None:
    import json

    from render import rundir

    done = run / rundir.DONE
    rundir.atomic_write_json(done, {**json.loads(done.read_text()), "timing": {"drift": drift}})


def test_the_render_time_speedup_widens_its_interval_by_the_reference_drift_of_the_run_it_is_measured_against(
        sweep_with_anchor: Path, db: Path) -> None:
    from assess.statistics.compare import render_speedup

    _with_reference_drift(sweep_with_anchor / "0_steps=28", 0.5)  # the anchor's reference slowed by half over its run
    score([sweep_with_anchor], db, metrics=["psnr"])
    steps8, sdpa = cell_key_of(make_cell(steps=8)), cell_key_of(make_cell(attention="sdpa"))
    with Index.open(db) as index:
        plain = render_speedup(index, steps8, sdpa, "smoke")  # the same latencies as the anchor's, no drift
        drifted = render_speedup(index, steps8, ANCHOR_KEY, "smoke")
        latencies = {k: [r["latency_s"] for r in index.samples_of(k, "smoke") if r["warmup"] == 0]
                     for k in (steps8, sdpa)}
    bare = speedup(latencies[sdpa], latencies[steps8])
    assert plain is not None and drifted is not None and bare is not None and bare.low is not None
    assert (plain.value, plain.low, plain.high, plain.n) == (bare.value, bare.low, bare.high, bare.n)
    assert drifted.value == plain.value and drifted.n == plain.n
    assert drifted.low == pytest.approx(bare.low / 1.5) and drifted.high == pytest.approx(bare.high * 1.5)


def test_a_side_by_side_speedup_is_shown_with_its_interval_and_prompts_and_marked_side_by_side(
        sweep_with_anchor: Path, db: Path) -> None:
    from assess.statistics.compare import speed_against
    from assess.statistics.side_by_side import SIDE_BY_SIDE, side_by_side
    from render.rundir.session_log import ContenderTiming, TimingSession

    score([sweep_with_anchor], db, metrics=["psnr"])
    steps8 = cell_key_of(make_cell(steps=8))
    session = TimingSession(
        session="s-1", started_at="2026-11-30T11:00:00+00:00", finished_at="2026-11-30T11:01:00+00:00",
        device="cpu", device_name="cpu", host="h", pid=1, samples=tuple(("t", 0) for _ in range(8)),
        orders=tuple((0, 1) for _ in range(8)), device_s=1.0,
        contenders=(ContenderTiming(steps8, "/r/cell", tuple(0.1 * (1 + 0.01 * i) for i in range(8)), 1, 0.1),
                    ContenderTiming(ANCHOR_KEY, "/r/anchor", tuple(0.3 for _ in range(8)), 1, 0.1)))
    with Index.open(db) as index:
        index.upsert_timing(session)
        pair = side_by_side(index, steps8, ANCHOR_KEY)
        estimate, timed = speed_against(index, steps8, ANCHOR_KEY, None)
    assert pair is not None and estimate is not None and timed == SIDE_BY_SIDE
    s = pair.speedup
    assert (estimate.value, estimate.low, estimate.high, estimate.n) == (s.value, s.low, s.high, s.n)
    assert s.low is not None and s.high is not None and s.low < s.value < s.high and s.n == 8
    assert estimate.note is not None and estimate.note.startswith(pair.how)


def test_each_cells_speedup_holds_its_figure_interval_and_timing_and_in_a_scope_reads_the_anchors_scoped_samples(
        sweep_with_anchor: Path, db: Path) -> None:
    from types import SimpleNamespace

    from assess.statistics.compare import cell_speeds, render_speedup, speed_against
    from assess.statistics.side_by_side import TIMED_APART

    score([sweep_with_anchor], db, metrics=["psnr"])
    steps8 = cell_key_of(make_cell(steps=8))
    with Index.open(db) as index:
        (split,) = cell_speeds(index, [steps8, steps8])[steps8].values()
        render = render_speedup(index, steps8, ANCHOR_KEY, "smoke")
        shown, timed = speed_against(index, steps8, ANCHOR_KEY, render)  # timed apart: its interval widened
        assert render is not None and shown is not None and timed == TIMED_APART
        assert split == {"against": ANCHOR_KEY, "speedup": shown.value, "low": shown.low, "high": shown.high,
                         "timed": TIMED_APART, "how": shown.note, "render_time": render.as_dict()}
        mine = {(r["prompt_sha"], r["seed"]) for r in index.samples_of(steps8, "smoke")}
        theirs = sorted((r["prompt_sha"], r["seed"]) for r in index.samples_of(ANCHOR_KEY, "smoke"))
        anchor_keys = set(theirs[len(theirs) // 2:])  # the anchor's later (slower) samples only
        scope = SimpleNamespace(cells={(steps8, "smoke"): SimpleNamespace(anchor_cell_key=ANCHOR_KEY, keys=mine),
                                       (ANCHOR_KEY, "smoke"): SimpleNamespace(anchor_cell_key=None, keys=anchor_keys)})
        scoped = cell_speeds(index, [steps8], scope)[steps8]["smoke"]
        expected = render_speedup(index, steps8, ANCHOR_KEY, "smoke", mine, anchor_keys)
    assert expected is not None and expected.as_dict() != render.as_dict()
    assert scoped["render_time"] == expected.as_dict()
