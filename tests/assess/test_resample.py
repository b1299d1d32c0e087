"""assess.statistics.resample does scipy's bootstrap and quantile arithmetic without scipy's per-call checks (issue 45: 5,000
cells spent 6 s in scipy.stats.bootstrap and 4 s in scipy.stats.quantile): its values are scipy's, to the last bit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from assess.statistics.resample import linear_quantiles, mean_interval_bca, resampled_medians
from assess.statistics.compare import CONFIDENCE, N_RESAMPLES, SEED, bootstrap


def _samples() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    found = [rng.normal(30.0, 3.0, size=n) for n in (2, 3, 5, 19, 20, 40)]
    found += [rng.exponential(1.0, size=25), rng.integers(0, 3, size=12).astype(float),  # skewed, many ties
              np.array([1.0, 1.0, 1.0, 2.0]), np.array([0.0, -0.0, 0.0, 1e-300]), np.array([5.0, np.inf, 3.0]),
              np.array([1.0, np.nan, 2.0]), rng.normal(0.0, 1e-12, size=8) + 1e6]
    return found


@pytest.mark.parametrize("data", _samples(), ids=lambda d: f"n{d.size}")
def test_the_mean_s_bca_interval_is_scipys(data: np.ndarray) -> None:
    expected = bootstrap((data,), np.mean, seed=SEED)  # scipy.stats.bootstrap, BCa then percentile
    found = mean_interval_bca(data, CONFIDENCE, N_RESAMPLES, SEED)
    assert np.array_equal(np.array(found, dtype=float), np.array(expected, dtype=float), equal_nan=True), (found, expected)
    assert found == expected or None in expected


@pytest.mark.parametrize("size", [1, 2, 7, 2000])
def test_linear_quantiles_are_scipys(size: int) -> None:
    rng = np.random.default_rng(size)
    alpha = (1 - CONFIDENCE) / 2
    probabilities = [np.stack((np.asarray(alpha), 1 - np.asarray(alpha)), axis=-1), np.array([0.0, 1.0]),
                     np.array([0.3, np.nan]), np.array([-0.1, 0.5]), rng.uniform(size=5)]
    for x in (rng.normal(size=size), rng.integers(0, 4, size=size).astype(float), np.full(size, np.inf),
              np.where(rng.uniform(size=size) < 0.5, np.inf, 1.0)):
        for p in probabilities:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = stats.quantile(x, p, axis=-1)
                found = linear_quantiles(x, p)
            assert np.array_equal(found, expected, equal_nan=True) and found.tobytes() == expected.tobytes(), (x, p)


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 19, 20, 199, 200])
def test_resampled_medians_are_numpys(size: int) -> None:
    """assess.statistics.resample.resampled_medians (the speed-up's resampled medians, one partition a row) equals np.median."""
    rng = np.random.default_rng(size)
    indices = rng.integers(0, max(size, 1), (N_RESAMPLES, size), dtype="int64")
    for data in (rng.lognormal(size=size), rng.integers(1, 4, size=size).astype(float),  # ties
                 np.where(rng.uniform(size=size) < 0.3, 0.0, -0.0) + rng.integers(0, 2, size=size),  # zeros, signs
                 np.where(rng.uniform(size=size) < 0.1, np.nan, rng.normal(size=size)),
                 np.where(rng.uniform(size=size) < 0.2, np.inf, rng.normal(size=size))):
        if size == 0:
            data = np.array([1.0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = np.median(data[indices], axis=-1)
            found = resampled_medians(data, indices)
        assert found.tobytes() == expected.tobytes(), data


@pytest.mark.parametrize("size", [2, 7, 2000])
def test_linear_quantiles_of_signed_zeros_are_scipys(size: int) -> None:
    """linear_quantiles reads a partition, not a sort, of values without a zero; with zeros of both signs (equal,
    placed either way by a partition) it sorts, and the quantiles keep scipy's signs too."""
    rng = np.random.default_rng(size)
    x = np.where(rng.uniform(size=size) < 0.5, -0.0, 0.0) + np.where(rng.uniform(size=size) < 0.3, 1.0, 0.0)
    alpha = (1 - CONFIDENCE) / 2
    for p in (np.stack((np.asarray(alpha), 1 - np.asarray(alpha)), axis=-1), np.array([0.0, 1.0]),
              rng.uniform(size=5)):
        expected = stats.quantile(x, p, axis=-1)
        assert linear_quantiles(x, p).tobytes() == expected.tobytes(), (x, p)


@pytest.mark.parametrize("data", _samples(), ids=lambda d: f"n{d.size}")
def test_the_median_s_percentile_interval_is_scipys(data: np.ndarray) -> None:
    """assess.statistics.resample.median_interval_percentile (each cell's latency interval, assess.metrics.speed) is
    scipy.stats.bootstrap's percentile interval of the median, to the last bit."""
    from assess.statistics.resample import median_interval_percentile

    expected = bootstrap((data,), np.median, method="percentile", seed=SEED)
    found = median_interval_percentile(data, CONFIDENCE, N_RESAMPLES, SEED)
    assert np.array_equal(np.array(found, dtype=float), np.array(expected, dtype=float), equal_nan=True), (found, expected)
    assert found == expected or None in expected


@pytest.mark.parametrize("shape", [(7,), (8,), (5, 8), (3, 4, 6), (2, 3, 7)])
def test_resampled_medians_are_numpys_median_of_the_resampled_rows_for_indices_of_any_shape(
        shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(7)
    data = rng.uniform(0.5, 2.0, 12)
    indices = rng.integers(0, 12, shape)
    assert np.array_equal(resampled_medians(data, indices), np.median(data[indices], axis=-1))
