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
