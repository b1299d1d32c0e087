"""Issue 30, item 1: non-inferiority is the default parity question; equivalence (TOST) stays for the asking and for
experiments frozen before the key existed."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest
from scipy import stats

from render.laws.gpu_budget import Budget
from assess.climb.decide import BudgetState, CellData, Plan, decide
from assess.experiment import ExperimentError, load_experiment
from assess.statistics.compare import Verdict, noninferiority, parity_test, parity_verdict
from render.laws import Ledger, freeze_rule
from tests.assess.climb_fixtures import hydra_state_kept, restore_hydra  # noqa: F401  (the fixture)

IDS = tuple(f"dev-{i:03d}" for i in range(12))
ROOMY = BudgetState(Budget(gpu_hours=10_000.0 / 3600, reserve_gpu_hours=1_000.0 / 3600), spent_s=0.0)


def values(mean: float, spread: float, n: int = 12) -> list[float]:
    return [mean + (spread if i % 2 else -spread) * (1 + i / 10) for i in range(n)]


@pytest.mark.slow
@pytest.mark.parametrize("mean", [-0.06, -0.04, -0.01, 0.0, 0.03, 0.07, 0.2])
@pytest.mark.parametrize("spread", [0.005, 0.02, 0.05])
@pytest.mark.parametrize("higher", [True, False])
def test_noninferiority_is_the_lower_end_of_the_interval_above_minus_band(mean: float, spread: float,
                                                                           higher: bool) -> None:
    band, alpha = 0.05, 0.05
    deltas = values(mean if higher else -mean, spread)  # a lower-is-better metric (LPIPS drift) mirrored
    p, out_p = noninferiority(deltas, band, higher_is_better=higher)
    good = [d if higher else -d for d in deltas]
    m, se = statistics.fmean(good), statistics.stdev(good) / math.sqrt(len(good))
    low, high = stats.t.interval(1 - 2 * alpha, len(good) - 1, loc=m, scale=se)
    assert p is not None and out_p is not None
    assert (p < alpha) == (low > -band)
    assert (out_p < alpha) == (high < -band)  # worse than the band: the whole interval below -band


def test_a_cell_better_than_the_anchor_is_at_parity_not_undecided() -> None:
    """The demo's final on 8c4daaf: +0.0073 [-0.0017, +0.0211] on a +-0.01 band was undecided under TOST."""
    better = values(0.0073, 0.01)
    assert parity_verdict(*parity_test(better, 0.01), 0.05, len(better)) == Verdict.PARITY
    assert parity_verdict(*parity_test(better, 0.01, "equivalence"), 0.05, len(better)) == Verdict.UNDECIDED
    much_better = values(0.2, 0.01)  # beyond +band: equivalence calls it out, non-inferiority parity
    assert parity_verdict(*parity_test(much_better, 0.01, "equivalence"), 0.05, 12) == Verdict.OUT
    assert parity_verdict(*parity_test(much_better, 0.01), 0.05, 12) == Verdict.PARITY
    worse = values(-0.05, 0.005)
    assert parity_verdict(*parity_test(worse, 0.01), 0.05, 12) == Verdict.OUT


def test_the_climb_crowns_a_faster_better_cell_under_noninferiority() -> None:
    def cell(coords: tuple[str, ...], delta: float, latency: float) -> CellData:
        deltas = {p: delta + (0.01 if i % 2 else -0.01) for i, p in enumerate(IDS[:4])}
        return CellData(coords, f"key-{'-'.join(coords)}", frozenset(IDS[:4]), deltas,
                        {p: [latency] for p in IDS[:4]})

    tables = {c.coords: c for c in (cell(("8",), 0.0, 1.0), cell(("4",), 0.03, 0.5))}
    for test, crowned in (("noninferiority", ("4",)), ("equivalence", ("8",))):
        plan = Plan(axes={"steps": ("4", "8")}, start=("8",), rungs=(4, 12), eta=2, band=0.02, alpha=0.05,
                    higher_is_better=True, dev_ids=IDS, test=test)
        d = decide(plan, tables, [], ROOMY)
        assert d.incumbent == crowned, (test, d.reasons)


pytestmark = pytest.mark.usefixtures("restore_hydra")


def test_a_new_experiment_asks_noninferiority_and_the_rule_says_so(tmp_path: Path) -> None:
    with hydra_state_kept():
        exp = load_experiment("tiny-demo", out_root=tmp_path)
    assert exp.quality.test == "noninferiority" and exp.rule["quality"]["test"] == "noninferiority"
    assert Plan.from_experiment(exp).test == "noninferiority"


@pytest.mark.slow
def test_an_experiment_frozen_before_the_key_keeps_its_equivalence_test(tmp_path: Path) -> None:
    with hydra_state_kept():
        rule = dict(load_experiment("tiny-demo", out_root=tmp_path).rule)
    old = {**rule, "quality": {k: v for k, v in rule["quality"].items() if k != "test"}}  # as frozen before the key
    freeze_rule(Ledger("tiny-demo", tmp_path), old)
    with hydra_state_kept():
        exp = load_experiment("tiny-demo", out_root=tmp_path)
        assert exp.quality.test == "equivalence" and exp.rule == old and exp.rule_problem is None
        with pytest.raises(ExperimentError, match=r'quality.test: null -> "noninferiority"'):
            load_experiment("tiny-demo", ["experiment.quality.test=noninferiority"], out_root=tmp_path)


def test_a_bad_test_is_refused_with_the_valid_ones(tmp_path: Path) -> None:
    with hydra_state_kept(), pytest.raises(ExperimentError) as err:
        load_experiment("tiny-demo", ["experiment.quality.test=tost"], out_root=tmp_path)
    assert str(err.value).startswith("experiment.quality.test=tost: valid tests are noninferiority, equivalence")
