"""scipy's bootstrap steps for the statistics a report computes per cell, without scipy's per-call overhead.

A report of 5,000 cells computes a BCa interval of a mean, a speed-up's percentile interval and its latencies'
medians' percentile intervals for every cell:
`scipy.stats.bootstrap` and `scipy.stats.quantile` spend about 1 ms a call checking and broadcasting their inputs,
more than the arithmetic itself. These functions do scipy's arithmetic step by step, in the same order on arrays of
the same shapes, so their values equal scipy's to the last bit (tests/assess/test_resample.py pins them on many
inputs); and since every call seeds its generator alike, the resampling indices of a sample size are drawn once.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np


def linear_quantiles(x: Any, p: Any) -> Any:
    """`scipy.stats.quantile(x, p, axis=-1)` of a 1-d float64 `x` (method 'linear', NaN propagated): scipy's
    `_quantile_iv` and `_quantile_hf` steps (numpy's own np.quantile rounds differently in the last bit)."""
    p = np.asarray(p, dtype=np.float64)
    if np.isnan(x).any():
        return np.full(p.shape, np.nan)
    n = np.asarray([x.shape[-1]], dtype=np.float64)
    masked = (p > 1) | (p < 0) | np.isnan(p)
    if masked.any():
        p = np.where(masked, 0.5, p)
    jg = p * n + (1 - p)
    jp1 = jg // 1
    j = jp1 - 1
    g = jg % 1
    g[j < 0] = 0
    j = np.clip(j, 0.0, n - 1)
    jp1 = np.clip(jp1, 0.0, n - 1)
    below, above = j.astype(np.int64), jp1.astype(np.int64)
    y = _sorted_at(x, np.concatenate((below.ravel(), above.ravel())))
    res = (1 - g) * y[below] + g * y[above]
    res[masked] = np.nan
    return res


def _sorted_at(x: Any, places: Any) -> Any:
    """`x` with the values np.sort(x) has at `places` there: a partition at those places, a fifth of a sort's
    time on a report's 2,000 resampled statistics. A sort when `x` holds a zero, which a partition could place
    with the other sign than the sort does (0.0 and -0.0 are equal)."""
    if not x.all():
        return np.sort(x)
    return np.partition(x, np.unique(places))


def resampled_medians(data: Any, indices: Any) -> Any:
    """`np.median(data[indices], axis=-1)` of a 1-d float64 `data`, to the last bit. When `data` holds no NaN and
    no zero, one partition at the middle place: numpy's partitions at two or three places (the middle ones and the
    last, for its NaN check), four times the cost; an even row's lower middle is the largest value below the middle
    place, and the two middle values are averaged by np.mean as numpy's are. Otherwise np.median itself (a zero's
    sign or a NaN could place differently)."""
    resampled = np.take(data, indices)
    m = resampled.shape[-1]
    if m < 2 or np.isnan(data).any() or not data.all():
        return np.median(resampled, axis=-1)
    middle = m // 2
    part = np.partition(resampled, middle, axis=-1)
    if m % 2:
        return np.mean(part[..., middle : middle + 1], axis=-1)
    return np.mean(np.stack((part[..., :middle].max(axis=-1), part[..., middle]), axis=-1), axis=-1)


@functools.lru_cache(maxsize=32)
def _resample_indices(n: int, n_resamples: int, seed: int) -> Any:
    """The (n_resamples, n) indices scipy.stats.bootstrap draws for one sample of n from a generator seeded `seed`."""
    indices = np.random.default_rng(seed).integers(0, n, (n_resamples, n), dtype="int64")
    indices.setflags(write=False)
    return indices


@functools.lru_cache(maxsize=32)
def _jackknife_indices(n: int) -> Any:
    """scipy's jackknife resample indices of a sample of n (`_jackknife_resample`, one batch): row i leaves out i."""
    keep = np.ones((n, n), dtype=bool)
    np.fill_diagonal(keep, False)
    indices = np.broadcast_to(np.arange(n), (n, n))[keep].reshape((n, n - 1))
    indices.setflags(write=False)
    return indices


def _bca_alphas(data: Any, theta_hat_b: Any, alpha: float) -> tuple[Any, Any]:
    """scipy's `_bca_interval` for np.mean of one sample: the two percentiles to read the distribution at."""
    from scipy.special import ndtr, ndtri

    theta_hat = np.expand_dims(np.mean(data, axis=-1), axis=-1)
    b = theta_hat_b.shape[-1]
    nonzeros = np.count_nonzero(theta_hat_b < theta_hat, axis=-1) + np.count_nonzero(theta_hat_b <= theta_hat, axis=-1)
    percentile = np.asarray(np.asarray(nonzeros).astype(theta_hat.dtype) / (2 * b), dtype=theta_hat.dtype)
    z0_hat = ndtri(percentile)
    theta_hat_i = np.mean(data[..., _jackknife_indices(data.shape[-1])], axis=-1)
    theta_hat_i = np.concatenate([theta_hat_i], axis=-1)
    n = float(theta_hat_i.shape[-1])
    u = (n - 1) * (np.mean(theta_hat_i, axis=-1, keepdims=True) - theta_hat_i)
    nums = [np.sum(u**3, axis=-1) / n**3]
    dens = [np.sum(u**2, axis=-1) / n**2]
    a_hat = 1 / 6 * sum(nums) / sum(dens) ** (3 / 2)
    z_alpha = float(ndtri(alpha))
    num1 = z0_hat + z_alpha
    num2 = z0_hat + -z_alpha
    return ndtr(z0_hat + num1 / (1 - a_hat * num1)), ndtr(z0_hat + num2 / (1 - a_hat * num2))


def mean_interval_bca(data: Any, confidence: float, n_resamples: int, seed: int) -> tuple[float | None, float | None]:
    """The interval `scipy.stats.bootstrap((data,), np.mean, method="BCa", ...)` gives with a generator seeded `seed`,
    falling back to the percentile method when BCa's is NaN (assess.statistics.compare.bootstrap's rule); (None, None) when
    both are."""
    import warnings

    data = np.asarray(data, dtype=np.float64)
    theta_hat_b = np.concatenate([np.mean(np.take(data, _resample_indices(data.shape[-1], n_resamples, seed)),
                                          axis=-1)], axis=-1)
    alpha = (1 - confidence) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        bca = np.stack(_bca_alphas(data, theta_hat_b, alpha), axis=-1)
        percentile = np.stack((np.asarray(alpha, dtype=theta_hat_b.dtype), 1 - np.asarray(alpha, dtype=theta_hat_b.dtype)),
                              axis=-1)
        for interval in (bca, percentile):
            ci = linear_quantiles(theta_hat_b, interval)
            low, high = float(ci[..., 0]), float(ci[..., 1])
            if not (math.isnan(low) or math.isnan(high)):
                return low, high
    return None, None


def median_interval_percentile(data: Any, confidence: float, n_resamples: int, seed: int
                               ) -> tuple[float | None, float | None]:
    """The interval `scipy.stats.bootstrap((data,), np.median, method="percentile", ...)` gives with a generator
    seeded `seed`; (None, None) when it is NaN. A report computes one for every cell's warm latencies (and again
    per its job's reference), 1 to 2 ms each through scipy."""
    import warnings

    data = np.asarray(data, dtype=np.float64)
    medians = resampled_medians(data, _resample_indices(data.shape[-1], n_resamples, seed))
    alpha = (1 - confidence) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        ci = linear_quantiles(medians, np.stack((np.asarray(alpha, dtype=medians.dtype),
                                                 1 - np.asarray(alpha, dtype=medians.dtype)), axis=-1))
    low, high = float(ci[..., 0]), float(ci[..., 1])
    return (None, None) if math.isnan(low) or math.isnan(high) else (low, high)
