"""Every statistic hypergrid reports, in one place (scipy), seeded so that reruns give the same numbers.

The report, the climb (assess.climb.evaluate, decide, final) and the shapes evaluation all use
these: one bootstrap (`bootstrap`, scipy.stats.bootstrap), one per-prompt paired delta
(`per_prompt_deltas`), one parity verdict (`tost`, `parity_verdict`), Holm's correction and one
Pareto front (`pareto_front`).

- A sample metric without a reference (CLIP score): the paired per-prompt difference to the
  anchor (each side averaged over seeds first), its mean with a 95 % bootstrap interval, and
  the Wilcoxon signed-rank p-value.
- A reference metric (PSNR, SSIM, LPIPS) already compares with the anchor: the per-prompt mean
  with a 95 % bootstrap interval.
- Speed: speed-up = anchor median warm latency / cell median warm latency, with a two-sample
  bootstrap (percentile) interval; paired when every warm sample of both records its job's reference
  workload (each latency divided by it: cells timed in different jobs, nodes or hours compare fairly), and
  widened by the reference's drift over the runs that rendered them (docs/timing.md).
- Between two cells, paired by prompt (what the climb's choice of incumbent decides with, and `speed_order`):
  speed (`speed_ratio`), the geometric mean of the per-prompt latency ratios with a Student t interval over
  the shared prompts, widened by each cell's noise figure (the drift of its job's reference timing);
  quality (`paired_difference`), the mean difference of their deltas with a paired t interval.
"""

from __future__ import annotations

import functools
import math
import statistics
import warnings
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from render.rundir.states import Name
from typing import Any

from assess.statistics.estimate import CONFIDENCE, Estimate

N_RESAMPLES = 2000
SEED = 0


def bootstrap(samples: Sequence[Any], statistic: Any, method: str = "BCa", seed: int = SEED
              ) -> tuple[float | None, float | None]:
    """The 95 % interval of `statistic` (vectorized, axis=-1) over `samples` (one array per group),
    resampled with scipy.stats.bootstrap; BCa falls back to percentile when BCa is degenerate."""
    import numpy as np
    from scipy import stats

    methods = (method, "percentile") if method == "BCa" else (method,)
    for name in methods:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=RuntimeWarning)
            warnings.simplefilter("ignore", category=stats.DegenerateDataWarning)
            result = stats.bootstrap(tuple(samples), statistic, confidence_level=CONFIDENCE, n_resamples=N_RESAMPLES,
                                     method=name, vectorized=True, rng=np.random.default_rng(seed))
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        if not (math.isnan(low) or math.isnan(high)):
            return low, high
    return None, None


def mean_interval(values: Sequence[float], seed: int = SEED) -> Estimate:
    """Mean with a 95 % BCa bootstrap interval (percentile when BCa is degenerate)."""
    import numpy as np

    from assess.statistics.memo import remembered
    from assess.statistics.resample import mean_interval_bca

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("no values")
    mean = float(data.mean())
    if data.size < 2:
        return Estimate(mean, None, None, 1, note="one value: no interval")
    if float(np.ptp(data)) == 0.0:
        return Estimate(mean, mean, mean, int(data.size), note="all values equal")
    # scipy.stats.bootstrap's BCa interval (`bootstrap`), its steps without its per-call checks: a report computes
    # one per cell (assess.statistics.resample; the same values to the last bit)
    low, high = remembered("mean-bca", seed, (data,), lambda: mean_interval_bca(data, CONFIDENCE, N_RESAMPLES, seed))
    return Estimate(mean, low, high, int(data.size))


def wilcoxon_p(differences: Sequence[float]) -> tuple[float | None, str | None]:
    """Two-sided Wilcoxon signed-rank p-value, or None with why."""
    from scipy import stats

    nonzero = [d for d in differences if d != 0]
    if not nonzero:
        return None, "all differences are 0"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        result = stats.wilcoxon(list(differences), zero_method="wilcox")
    p = float(result.pvalue)
    return (None, "p-value undefined") if math.isnan(p) else (p, None)


def per_prompt(values: Mapping[tuple[str, int], float]) -> dict[str, float]:
    """(prompt_id, seed) -> value  ==>  prompt_id -> mean over its seeds."""
    groups: dict[str, list[float]] = defaultdict(list)
    for (prompt_id, _seed), value in values.items():
        groups[prompt_id].append(value)
    return {p: sum(v) / len(v) for p, v in groups.items()}


def per_prompt_deltas(cell: Mapping[tuple[str, int], float], anchor: Mapping[tuple[str, int], float] | float
                      ) -> dict[str, float]:
    """prompt_id -> mean over its seeds of (cell - anchor), over the (prompt, seed) samples both have.

    `anchor` is the anchor's values, or one number: a reference metric's value for the anchor against
    itself (SSIM 1), which the cell's values already compare with."""
    if not isinstance(anchor, Mapping):
        return per_prompt({k: v - anchor for k, v in cell.items()})
    return per_prompt({k: cell[k] - anchor[k] for k in set(cell) & set(anchor)})


def paired_delta(cell: Mapping[tuple[str, int], float], anchor: Mapping[tuple[str, int], float] | float,
                 seed: int = SEED) -> Estimate | None:
    """Mean per-prompt difference cell - anchor over the samples both have, with CI and p-value."""
    deltas = per_prompt_deltas(cell, anchor)
    if not deltas:
        return None
    diffs = [deltas[p] for p in sorted(deltas)]
    estimate = mean_interval(diffs, seed)
    p_value, why = wilcoxon_p(diffs)
    note = "; ".join(n for n in (estimate.note, why) if n) or None
    return Estimate(estimate.value, estimate.low, estimate.high, estimate.n, p_value, note)


def reference_mean(cell: Mapping[tuple[str, int], float], seed: int = SEED) -> Estimate | None:
    """Per-prompt mean of a metric that already compares with the anchor, with its CI."""
    if not cell:
        return None
    return mean_interval(list(per_prompt(cell).values()), seed)


def speedup(anchor_latencies: Sequence[float], cell_latencies: Sequence[float], seed: int = SEED) -> Estimate | None:
    """median(anchor) / median(cell) with a two-sample bootstrap interval."""
    import numpy as np

    from assess.statistics.memo import remembered

    a = np.asarray(anchor_latencies, dtype=float)
    c = np.asarray(cell_latencies, dtype=float)
    if a.size == 0 or c.size == 0:
        return None
    value = float(np.median(a) / np.median(c))
    if a.size < 2 or c.size < 2:
        return Estimate(value, None, None, int(min(a.size, c.size)), note="fewer than 2 warm samples: no interval")

    low, high = remembered("median-ratio", seed, (a, c), lambda: median_ratio_interval(a, c, seed))
    return Estimate(value, low, high, int(min(a.size, c.size)))


def median_ratio_interval(a: Any, c: Any, seed: int = SEED) -> tuple[float | None, float | None]:
    """The 95 % two-sample percentile bootstrap interval of median(a) / median(c): scipy.stats.bootstrap's own steps
    (one batch of N_RESAMPLES, `a` resampled first from the seeded generator, then `c`; scipy.stats.quantile of the
    ratios, its arithmetic without its per-call checks: assess.statistics.resample), with `a`'s resampled medians and `c`'s
    resampling indices kept per (a, seed) and size of `c`. A report compares every cell with one anchor: the
    anchor's 2,000 resampled medians are drawn once, and the indices once per cell size, not once per cell (every
    cell's generator is in the same state after the anchor's draws; tests pin the values to
    scipy.stats.bootstrap's)."""
    import numpy as np

    from assess.statistics.resample import linear_quantiles, resampled_medians

    anchor = a.tobytes()
    medians, _ = _anchor_medians(anchor, a.size, seed)
    ratios = medians / resampled_medians(c, _cell_indices(anchor, a.size, seed, c.size))
    alpha = (1 - CONFIDENCE) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        ci = linear_quantiles(ratios, np.stack((np.asarray(alpha), 1 - np.asarray(alpha)), axis=-1))
    low, high = float(ci[0]), float(ci[1])
    return (None, None) if math.isnan(low) or math.isnan(high) else (low, high)


@functools.lru_cache(maxsize=64)
def _anchor_medians(data: bytes, size: int, seed: int) -> tuple[Any, Mapping[str, Any]]:
    """The N_RESAMPLES medians of `data` (float64) resampled by a generator seeded `seed`, and its state after."""
    import numpy as np

    from assess.statistics.resample import resampled_medians

    a = np.frombuffer(data, dtype=float, count=size)
    rng = np.random.default_rng(seed)
    medians = resampled_medians(a, rng.integers(0, size, (N_RESAMPLES, size), dtype="int64"))
    return medians, rng.bit_generator.state


@functools.lru_cache(maxsize=64)
def _cell_indices(anchor: bytes, size: int, seed: int, cell_size: int) -> Any:
    """The (N_RESAMPLES, cell_size) indices the generator draws for the cell after the anchor's (`_anchor_medians`)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rng.bit_generator.state = _anchor_medians(anchor, size, seed)[1]
    indices = rng.integers(0, cell_size, (N_RESAMPLES, cell_size), dtype="int64")
    indices.setflags(write=False)
    return indices


@dataclass(frozen=True)
class SpeedRatio:
    """latency(a) / latency(b), paired by prompt, with its interval (None: fewer than two shared prompts)."""

    value: float
    low: float | None
    high: float | None
    n: int  # shared prompts with warm latencies on both sides (or side-by-side rounds: `basis`)
    confidence: float
    basis: str = "shared prompt(s)"  # what n counts

    @property
    def a_faster(self) -> bool:
        """a is faster than b beyond the interval (its upper end below 1)."""
        return self.high is not None and self.high < 1.0

    @property
    def b_faster(self) -> bool:
        return self.low is not None and self.low > 1.0

    def text(self) -> str:
        interval = f" [{self.low:.3g}, {self.high:.3g}]" if self.low is not None and self.high is not None else ""
        return f"speed ratio {self.value:.3g}{interval} over {self.n} {self.basis}"


def _prompt_log_latency(latencies: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """prompt -> log of its median warm latency (several warm calls per prompt count once)."""
    return {p: math.log(statistics.median(v)) for p, v in latencies.items() if v and min(v) > 0}


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE, extra: float = 0.0
               ) -> tuple[float, float | None, float | None]:
    """(mean, low, high): the two-sided Student t interval of the mean, its half-width combined root-sum-square
    with `extra` (a systematic error in the same units); no interval below two values."""
    from scipy.special import stdtrit

    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None, None
    se = statistics.stdev(values) / math.sqrt(len(values))
    half = math.hypot(float(stdtrit(len(values) - 1, 0.5 + confidence / 2)) * se, extra)
    return mean, mean - half, mean + half


def speed_ratio(a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]], confidence: float = CONFIDENCE,
                noise_a: float | None = None, noise_b: float | None = None) -> SpeedRatio | None:
    """latency(a) / latency(b) over the prompts both have (prompt -> warm latencies): the geometric mean of the
    per-prompt ratios, with a two-sided `confidence` Student t interval of the mean log ratio (paired by prompt:
    a prompt's own difficulty cancels), its half-width combined root-sum-square with each side's relative noise
    figure (log(1 + noise): a drift of the job's reference timing shifts every prompt of a cell alike, which no
    number of prompts averages away). No interval below two shared prompts; None without one."""
    la, lb = _prompt_log_latency(a), _prompt_log_latency(b)
    diffs = [la[p] - lb[p] for p in sorted(set(la) & set(lb))]
    if not diffs:
        return None
    drift = math.hypot(math.log1p(noise_a or 0.0), math.log1p(noise_b or 0.0))
    mean, low, high = t_interval(diffs, confidence, drift)
    return SpeedRatio(math.exp(mean), None if low is None else math.exp(low), None if high is None else math.exp(high),
                      len(diffs), confidence)


def speed_order(a_rows: Sequence[Any], b_rows: Sequence[Any], a_drift: float = 0.0, b_drift: float = 0.0,
                same_work: bool = False, confidence: float = CONFIDENCE) -> int:
    """-1 when cell a is faster than b beyond the noise, 1 when b is, 0 within noise: the climb's paired ratio
    (`speed_ratio`, each latency per its job's reference workload, by prompt and seed) has 1 in its interval,
    either cell is flagged noisy (assess.statistics.noise), or the two did the same work (byte-identical images)."""
    from assess.statistics.noise import by_sample, noise

    if same_work or noise(a_rows, [a_drift]).noisy or noise(b_rows, [b_drift]).noisy:
        return 0
    ratio = speed_ratio(by_sample(a_rows), by_sample(b_rows), confidence, a_drift, b_drift)
    if ratio is None:
        return 0
    return -1 if ratio.a_faster else 1 if ratio.b_faster else 0


def paired_difference(a: Mapping[str, float], b: Mapping[str, float], confidence: float = CONFIDENCE
                      ) -> Estimate | None:
    """Mean of a - b over the keys (prompts) both have, with a two-sided `confidence` paired t interval."""
    shared = sorted(set(a) & set(b))
    if not shared:
        return None
    mean, low, high = t_interval([a[k] - b[k] for k in shared], confidence)
    return Estimate(mean, low, high, len(shared))


# -- parity, multiple tests, the frontier ---------------------------------------------------


class Verdict(Name):
    """A cell's quality against the anchor's, on a band: equivalent, beyond it, or not decided by the data."""

    PARITY = "parity"
    OUT = "out"
    UNDECIDED = "undecided"
    NO_DATA = "no-data"


def _t_sf(t: float, df: int) -> float:
    """P(T > t) for Student's t with df degrees of freedom (scipy.special.stdtr: no distribution-object overhead)."""
    from scipy.special import stdtr

    return float(stdtr(df, -t))


def tost(deltas: Sequence[float], band: float) -> tuple[float | None, float | None]:
    """(equivalence p, out-of-band p) of the mean delta against +-band, paired t; None below two values.

    Equivalence: TOST, two one-sided t-tests of H0: mean <= -band and H0: mean >= +band, p = the larger
    (the same as asking whether the (1 - 2 alpha) t-interval lies inside the band). Out of band: the
    mirror test, the mean lies beyond the band on its side, one-sided t doubled for choosing the side.
    Zero spread (every delta equal, e.g. the anchor against itself) decides by the value alone."""
    n = len(deltas)
    if n < 2:
        return None, None
    mean = statistics.fmean(deltas)
    sd = statistics.stdev(deltas)
    if sd == 0.0:
        inside, outside = abs(mean) < band, abs(mean) > band
        return (0.0 if inside else 1.0), (0.0 if outside else 1.0)
    se = sd / math.sqrt(n)
    p_above_low = _t_sf((mean + band) / se, n - 1)  # H0: mean <= -band
    p_below_high = _t_sf((band - mean) / se, n - 1)  # H0: mean >= +band
    equivalence = max(p_above_low, p_below_high)
    beyond = _t_sf((abs(mean) - band) / se, n - 1)  # H0: |mean| <= band, on the side the mean lies
    return equivalence, min(1.0, 2 * beyond)


class ParityTest(Name):
    """The question a parity verdict answers (experiment.quality.test; part of the frozen decision rule)."""

    NONINFERIORITY = "noninferiority"  # no worse than the anchor by more than the band (one-sided): speed work's question
    EQUIVALENCE = "equivalence"  # within +-band on both sides (TOST): a better cell is not at parity when much better


def noninferiority(deltas: Sequence[float], band: float, higher_is_better: bool = True
                   ) -> tuple[float | None, float | None]:
    """(non-inferiority p, worse-than-band p) of the mean delta, paired t, one-sided; None below two values.

    The delta is turned so that higher is better (a drift metric such as LPIPS, where the anchor's own 0 is the
    best possible, the same way: more drift is worse). Non-inferiority: H0 mean <= -band, p < alpha exactly when
    the lower end of the (1 - 2 alpha) t-interval lies above -band (a cell better than the anchor is at parity,
    however much better). Worse than the band: the mirror one-sided test, H0 mean >= -band. Zero spread decides
    by the value alone."""
    n = len(deltas)
    if n < 2:
        return None, None
    sign = 1.0 if higher_is_better else -1.0
    mean = sign * statistics.fmean(deltas)
    sd = statistics.stdev(deltas)
    if sd == 0.0:
        return (0.0 if mean > -band else 1.0), (0.0 if mean < -band else 1.0)
    se = sd / math.sqrt(n)
    return _t_sf((mean + band) / se, n - 1), _t_sf(-(mean + band) / se, n - 1)


def parity_test(deltas: Sequence[float], band: float, test: ParityTest | str = ParityTest.NONINFERIORITY,
                higher_is_better: bool = True) -> tuple[float | None, float | None]:
    """(parity p, out-of-band p) under the experiment's test: `noninferiority` (default) or `equivalence` (TOST)."""
    if ParityTest(test) == ParityTest.EQUIVALENCE:
        return tost(deltas, band)
    return noninferiority(deltas, band, higher_is_better)


def parity_text(test: ParityTest | str, band: float, alpha: float) -> str:
    """How a verdict was reached, in words (the climb's table, the reports' verdict tables)."""
    if ParityTest(test) == ParityTest.EQUIVALENCE:
        return f"equivalence: TOST within ±{band:g} at alpha {alpha:g}"
    return f"non-inferiority: no worse than -{band:g} at alpha {alpha:g} (one-sided)"


def parity_verdict(tost_p: float | None, out_p: float | None, alpha: float, n: int) -> Verdict:
    """The verdict of `tost`'s two p-values at alpha; no-data when no prompt has a delta."""
    if n == 0:
        return Verdict.NO_DATA
    if tost_p is not None and tost_p < alpha:
        return Verdict.PARITY
    if out_p is not None and out_p < alpha:
        return Verdict.OUT
    return Verdict.UNDECIDED


def parity_decision(deltas: Sequence[float], band: float, alpha: float,
                    test: ParityTest | str = ParityTest.NONINFERIORITY, higher_is_better: bool = True) -> Verdict:
    """A cell's verdict from its paired per-prompt deltas (cell - anchor) under a parity rule: the one function the
    report's verdict table, `assess status`, the answer line, the category sheet and the climb decide with (the climb
    keeps the two p-values it reaches it from: assess.climb.evaluate)."""
    parity_p, out_p = parity_test(deltas, band, test, higher_is_better)
    return parity_verdict(parity_p, out_p, alpha, len(deltas))


def holm(p_values: Mapping[Any, float | None]) -> dict[Any, float | None]:
    """Holm step-down adjusted p-values (monotone, capped at 1); None stays None."""
    given = sorted(((p, k) for k, p in p_values.items() if p is not None), key=lambda x: (x[0], str(x[1])))
    m = len(given)
    adjusted: dict[Any, float | None] = {k: None for k, p in p_values.items() if p is None}
    running = 0.0
    for i, (p, key) in enumerate(given):
        running = max(running, min(1.0, (m - i) * p))
        adjusted[key] = running
    return adjusted


def pareto_front(points: Sequence[tuple[float, float]], maximize: tuple[bool, bool] = (True, True)) -> list[int]:
    """Indices of the points no other point beats on both coordinates (at least as good on both, better on
    one); `maximize` says, per coordinate, whether higher is better. Equal points are all kept."""
    signs = [1.0 if m else -1.0 for m in maximize]
    scored = [(signs[0] * x, signs[1] * y) for x, y in points]
    return [i for i, (x, y) in enumerate(scored)
            if not any(x2 >= x and y2 >= y and (x2 > x or y2 > y) for x2, y2 in scored)]


@dataclass(frozen=True)
class CellComparison:
    cell_key: str
    anchor_cell_key: str
    metrics: dict[str, Estimate]  # metric -> mean (reference metrics) or delta to the anchor
    kinds: dict[str, str]  # metric -> "mean" | "delta"
    speedup: Estimate | None  # side by side when the two were timed so (assess.statistics.side_by_side), else timed apart
    render_speedup: Estimate | None = None  # from the render-time latencies, always (shown beside it)
    timed: str | None = None  # "side by side" | "timed apart" | None (no speed figure)


def _sample_values(index: Any, cell_key: str, split: str, keys: set[tuple[str, int]] | None = None
                   ) -> dict[str, dict[tuple[str, int], tuple[float, str]]]:
    """metric -> (text identity, seed) -> (value, config) at the registry's current version of each metric only: a
    cell half re-scored after a version change never averages the two versions. A cell and its anchor are paired
    by these keys: by the prompt's content, never by its id."""
    from assess.metrics import SPECS

    in_split = {(s["prompt_sha"], s["seed"]) for s in index.samples_of(cell_key, split)}
    rows = [r for r in index.scores_of(cell_key) if r["value"] is not None and (r["prompt_sha"], r["seed"]) in in_split]
    out: dict[str, dict[tuple[str, int], tuple[float, str]]] = defaultdict(dict)
    for r in rows:
        spec = SPECS.get(r["metric"])
        if spec is not None and r["metric_version"] == spec.version and (keys is None or (r["prompt_sha"], r["seed"]) in keys):
            out[r["metric"]][(r["prompt_sha"], r["seed"])] = (r["value"], r["config"])
    return out


def _warm_rows(index: Any, cell_key: str, split: str, keys: set[tuple[str, int]] | None = None) -> list[dict[str, Any]]:
    return [r for r in index.samples_of(cell_key, split) if r["warmup"] == 0 and r["latency_s"] is not None
            and (keys is None or (r["prompt_sha"], r["seed"]) in keys)]


def reference_drift(index: Any, cell_key: str) -> float | None:
    """The reference's largest drift over a run that rendered some of the cell's samples (None: none recorded)."""
    drifts = [r["ref_drift"] for r in index.runs_of(cell_key) if (r["n_rendered"] or 0) > 0 and r["ref_drift"] is not None]
    return float(max(drifts)) if drifts else None


def paired_speedup(anchor_rows: Sequence[Any], cell_rows: Sequence[Any], anchor_drift: float = 0.0,
                   cell_drift: float = 0.0) -> Estimate | None:
    """The anchor's median warm latency over the cell's, each latency divided by its job's reference workload when
    every sample of both has one; the interval widened by the two sides' reference drift (added in quadrature)."""
    return _paired_speedup(_latencies(anchor_rows), _latencies(cell_rows), anchor_drift, cell_drift)


@dataclass(frozen=True)
class _Latencies:
    """One side of a speed-up: its warm latencies (float64 arrays), each per its job's reference workload (None
    unless every sample has one) and as measured."""

    per_reference: Any
    measured: Any


def _latencies(rows: Sequence[Any]) -> _Latencies:
    import numpy as np

    from assess.statistics.noise import normalised

    per_reference = normalised(rows)
    return _Latencies(None if per_reference is None else np.asarray(per_reference, dtype=float),
                      np.asarray([float(r["latency_s"]) for r in rows], dtype=float))


def _paired_speedup(anchor: _Latencies, cell: _Latencies, anchor_drift: float, cell_drift: float
                    ) -> Estimate | None:
    paired = anchor.per_reference is not None and cell.per_reference is not None
    if paired:
        estimate = speedup(anchor.per_reference, cell.per_reference)
    else:
        estimate = speedup(anchor.measured, cell.measured)
    if estimate is None:
        return None
    slack = 1.0 + math.hypot(anchor_drift, cell_drift)
    how = ("paired: each latency per its job's reference workload" if paired
           else "unpaired: not every sample records its job's reference timing")
    note = f"{how}; {estimate.note}" if estimate.note else how
    low = estimate.low / slack if estimate.low is not None else None
    high = estimate.high * slack if estimate.high is not None else None
    return Estimate(estimate.value, low, high, estimate.n, note=note)


def quality_deltas(index: Any, cell_key: str, anchor_cell_key: str, split: str, metric: str,
                   keys: set[tuple[str, int]] | None = None, anchor_keys: set[tuple[str, int]] | None = None
                   ) -> dict[str, float]:
    """prompt text identity -> one metric's quality delta to the anchor, as the climb reads it: cell - anchor on the samples
    both have under the same configuration; for a reference metric, its value minus the anchor's against itself
    (SSIM 1). Empty for a reference metric without such a value (PSNR)."""
    from assess.metrics import SPECS

    spec = SPECS[metric]
    if spec.needs_reference:
        if spec.identity is None:
            return {}  # nothing to read: a sweep report's verdict table asks this of every cell
        cell = _sample_values(index, cell_key, split, keys).get(metric, {})
        return per_prompt_deltas({k: v for k, (v, _) in cell.items()}, spec.identity)
    cell = _sample_values(index, cell_key, split, keys).get(metric, {})
    theirs = _sample_values(index, anchor_cell_key, split, anchor_keys).get(metric, {})
    same = {k for k, (_, config) in cell.items() if k in theirs and theirs[k][1] == config}
    return per_prompt_deltas({k: cell[k][0] for k in same}, {k: theirs[k][0] for k in same})


def compare_cell(index: Any, cell_key: str, anchor_cell_key: str, split: str,
                 keys: set[tuple[str, int]] | None = None, anchor_keys: set[tuple[str, int]] | None = None,
                 memo: dict[Any, Any] | None = None) -> CellComparison:
    """Every statistic of one cell against its anchor, from the index; keys (and anchor_keys) limit each side
    to the (text identity, seed) pairs of a report's scope (assess.statistics.scope). `memo` (one dict for the cells of one
    report) keeps what the anchor side reads, read once for all the cells compared with it."""
    from assess.metrics import SPECS

    cell = _sample_values(index, cell_key, split, keys)
    anchor = _remembered(memo, ("values", anchor_cell_key, split, anchor_keys),
                         lambda: _sample_values(index, anchor_cell_key, split, anchor_keys))
    metrics: dict[str, Estimate] = {}
    kinds: dict[str, str] = {}
    for name, values in cell.items():
        spec = SPECS.get(name)
        if spec is None:
            continue
        if spec.needs_reference:
            estimate, kind = reference_mean({k: v for k, (v, _) in values.items()}), "mean"
        else:  # an anchor and a cell are compared only under the same configuration (e.g. the same CLIP model)
            theirs = anchor.get(name, {})
            same = {k for k, (_, config) in values.items() if k in theirs and theirs[k][1] == config}
            estimate = paired_delta({k: values[k][0] for k in same}, {k: theirs[k][0] for k in same})
            kind = "delta"
        if estimate is not None:
            metrics[name], kinds[name] = estimate, kind
    render = render_speedup(index, cell_key, anchor_cell_key, split, keys, anchor_keys, memo)
    speed, timed = speed_against(index, cell_key, anchor_cell_key, render)
    return CellComparison(cell_key, anchor_cell_key, metrics, kinds, speed, render, timed)


def _remembered(memo: dict[Any, Any] | None, key: tuple[Any, ...], read: Any) -> Any:
    if memo is None:
        return read()
    key = tuple(frozenset(k) if isinstance(k, set) else k for k in key)
    if key not in memo:
        memo[key] = read()
    return memo[key]


def render_speedup(index: Any, cell_key: str, against: str, split: str, keys: set[tuple[str, int]] | None = None,
                   against_keys: set[tuple[str, int]] | None = None, memo: dict[Any, Any] | None = None
                   ) -> Estimate | None:
    """The speed-up of a cell over another from their render-time warm latencies (`paired_speedup`: each per its
    job's reference workload when recorded, the interval widened by the reference's drift); `memo`: as
    compare_cell's, for the side it is measured against."""
    theirs = _remembered(memo, ("latencies", against, split, against_keys),
                         lambda: _latencies(_warm_rows(index, against, split, against_keys)))
    drift = _remembered(memo, ("drift", against), lambda: reference_drift(index, against))
    return _paired_speedup(theirs, _latencies(_warm_rows(index, cell_key, split, keys)), drift or 0.0,
                           reference_drift(index, cell_key) or 0.0)


def speed_against(index: Any, cell_key: str, against: str, render: Estimate | None) -> tuple[Estimate | None, str | None]:
    """The speed-up of a cell over another to show and decide with, and how it was timed: the side-by-side figure
    when a session timed the two together (assess.statistics.side_by_side), else the render-time one marked as timed apart."""
    from assess.statistics.side_by_side import SIDE_BY_SIDE, TIMED_APART, side_by_side, timed_apart

    pair = side_by_side(index, cell_key, against) if cell_key != against else None
    if pair is not None:
        s = pair.speedup
        return Estimate(s.value, s.low, s.high, s.n, note=pair.how + (f"; {s.note}" if s.note else "")), SIDE_BY_SIDE
    return (timed_apart(render), TIMED_APART) if render is not None else (None, None)


def cell_speeds(index: Any, cell_keys: Sequence[str], scope: Any = None) -> dict[str, dict[str, Any]]:
    """cell key -> split -> its speed-up over its anchor as every tool shows it (`speed_against`: side by side when
    timed so, else the render-time figure marked timed apart), with the render-time figure beside it; with a scope
    (assess.statistics.scope.Scope), the render-time figure over the scope's (prompt, seed) pairs only, as the report's."""
    out: dict[str, dict[str, Any]] = {}
    for cell_key in dict.fromkeys(cell_keys):
        runs = index.query("SELECT DISTINCT split, anchor_cell_key FROM runs WHERE cell_key = ? AND is_anchor = 0",
                           (cell_key,))
        for run in runs:
            anchor = run["anchor_cell_key"]
            keys = anchor_keys = None
            if scope is not None:
                own, theirs = scope.cells.get((cell_key, run["split"])), scope.cells.get((anchor, run["split"]))
                if own is None or own.anchor_cell_key != anchor:
                    continue
                keys, anchor_keys = own.keys, theirs.keys if theirs is not None else set()
            render = render_speedup(index, cell_key, anchor, run["split"], keys, anchor_keys)
            speed, timed = speed_against(index, cell_key, anchor, render)
            if speed is not None:
                out.setdefault(cell_key, {})[run["split"]] = {
                    "against": anchor, "speedup": speed.value, "low": speed.low, "high": speed.high,
                    "timed": timed, "how": speed.note, "render_time": render.as_dict() if render else None}
    return out
