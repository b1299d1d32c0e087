"""The climb decides speed with its uncertainty (issue 19, item 3): a cell displaces another on speed only when
it is faster beyond the paired speed interval (widened by the cells' noise figures); within noise the better
quality wins (beyond its own paired interval; else the lower median is kept, and called a choice within noise);
a cell flagged noisy is never crowned on speed alone; the rule's confidence is frozen with the rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from render.laws.gpu_budget import Budget
from assess.climb.decide import BudgetState, CellData, Decision, Plan, decide, history_entry

IDS = tuple(f"dev-{i:03d}" for i in range(16))
PLAN = Plan(axes={"steps": ("2", "4", "8", "16"), "cache": ("none", "fbcache", "taylorseer")}, start=("8", "none"),
            rungs=(4, 8, 16), eta=2, band=0.05, alpha=0.05, higher_is_better=True, dev_ids=IDS, n_seeds=1,
            default_steps=8, anchor_steps=16)
ROOMY = BudgetState(Budget(gpu_hours=10_000.0 / 3600, reserve_gpu_hours=1_000.0 / 3600), spent_s=0.0)
FAST_WORSE, SLOW_BETTER = ("4", "none"), ("4", "fbcache")


def cell(coords: tuple[str, ...], delta: float, latencies: np.ndarray, **kwargs: object) -> CellData:
    """A cell at parity on all 16 prompts (deltas delta +- 0.002), with these warm latencies, one per prompt."""
    deltas = {p: delta + (0.002 if i % 2 else -0.002) for i, p in enumerate(IDS)}
    return CellData(coords, f"key-{'-'.join(coords)}", frozenset(IDS), deltas,
                    {p: [float(x)] for p, x in zip(IDS, latencies, strict=True)}, **kwargs)  # type: ignore[arg-type]


def noisy_twins(seed: int = 3, spread: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """Two cells of the same true speed, timed with `spread` per-call noise; the first's median comes out lower."""
    rng = np.random.default_rng(seed)
    difficulty = np.exp(rng.normal(0, 0.3, len(IDS)))  # hard prompts are slow for both
    a = 0.5 * difficulty * np.exp(rng.normal(0, spread, len(IDS)))
    b = 0.5 * difficulty * np.exp(rng.normal(0, spread, len(IDS)))
    assert np.median(a) < np.median(b)  # the point estimate says the first is faster: noise, not speed
    return a, b


def incumbent(*cells: CellData) -> Decision:
    return decide(PLAN, {c.coords: c for c in cells}, [], ROOMY)


def test_noise_does_not_crown_the_point_estimate_within_noise_the_better_quality_wins() -> None:
    """On the branch point the climb took the lower median (4 steps, worse quality) although both cells have the
    same true speed."""
    a, b = noisy_twins()
    d = incumbent(cell(FAST_WORSE, -0.03, a), cell(SLOW_BETTER, -0.01, b))
    assert d.incumbent == SLOW_BETTER
    assert d.speed_rule.startswith("within noise of steps=4 cache=none on speed (speed ratio")
    assert "the better quality decided (Δ -0.01 against -0.03 for steps=4 cache=none)" in d.speed_rule


def test_within_noise_on_both_legs_the_lower_median_is_kept_and_called_so() -> None:
    a, b = noisy_twins()
    d = incumbent(cell(FAST_WORSE, -0.02, a), cell(SLOW_BETTER, -0.02, b))  # the same quality, prompt by prompt
    assert d.incumbent == FAST_WORSE
    assert d.speed_rule.endswith("within noise on quality too of steps=4 cache=fbcache: the lower median latency decided")


def test_a_cell_faster_beyond_the_interval_displaces_on_speed() -> None:
    a, b = noisy_twins()
    d = incumbent(cell(FAST_WORSE, -0.03, a), cell(SLOW_BETTER, -0.01, b * 1.6))
    assert d.incumbent == FAST_WORSE and d.speed_rule.startswith("on speed: faster beyond noise than steps=4 cache=fbcache")


def test_the_noise_figure_widens_the_interval() -> None:
    steady_fast, steady_slow = np.full(len(IDS), 0.45), np.full(len(IDS), 0.50)  # 10 % apart, no spread at all
    assert incumbent(cell(FAST_WORSE, -0.03, steady_fast), cell(SLOW_BETTER, -0.01, steady_slow)).incumbent == FAST_WORSE
    drifting = incumbent(cell(FAST_WORSE, -0.03, steady_fast, noise=0.1), cell(SLOW_BETTER, -0.01, steady_slow, noise=0.1))
    assert drifting.incumbent == SLOW_BETTER and "within noise" in drifting.speed_rule  # 10 % drift of each job's reference


def test_a_cell_flagged_noisy_is_not_crowned_on_speed_alone() -> None:
    fast, slow = np.full(len(IDS), 0.2), np.full(len(IDS), 0.5)
    why = "reference drifted 40 % during the job"
    d = incumbent(cell(FAST_WORSE, -0.03, fast, noisy=why), cell(SLOW_BETTER, -0.01, slow))
    assert d.incumbent == SLOW_BETTER
    assert f"steps=4 cache=none is flagged noisy ({why}): not crowned on speed alone" in d.speed_rule
    # on quality it still can be: the noisy cell with the better quality among the cells within noise of it
    assert incumbent(cell(FAST_WORSE, -0.01, fast, noisy=why), cell(SLOW_BETTER, -0.03, slow)).incumbent == FAST_WORSE


def test_the_reasons_and_the_history_entry_say_which_rule_decided() -> None:
    a, b = noisy_twins()
    d = incumbent(cell(FAST_WORSE, -0.03, a), cell(SLOW_BETTER, -0.01, b))
    assert d.reasons[0].startswith("incumbent (confirmed at rung 16): steps=4 cache=fbcache, chosen within noise of")
    assert history_entry(PLAN, d, "s")["speed_rule"] == d.speed_rule


def test_the_speed_ratio_is_paired_by_prompt() -> None:
    from assess.statistics.compare import speed_ratio

    difficulty = np.array([0.1, 1.0, 3.0, 0.5, 2.0, 0.2])  # prompts that differ 30x in cost
    a = {f"p{i}": [0.8 * x * (1.01 if i % 2 else 0.99)] for i, x in enumerate(difficulty)}
    b = {f"p{i}": [x] for i, x in enumerate(difficulty)}
    r = speed_ratio(a, b)
    assert r is not None and r.n == 6 and r.a_faster and 0.78 < r.low < r.value < r.high < 0.82  # type: ignore[operator]
    one = speed_ratio({"p0": [1.0]}, {"p0": [2.0], "p1": [1.0]})
    assert one is not None and (one.n, one.low, one.a_faster) == (1, None, False)  # one shared prompt: no interval
    assert speed_ratio({"p0": [1.0]}, {"p1": [1.0]}) is None


# -- the confidence is part of the frozen decision rule ----------------------------------------


def test_the_speed_confidence_is_frozen_with_the_rule_and_old_rules_still_read(tmp_path: Path) -> None:
    from render.laws import Ledger, RuleChanged, check_rule, experiment_rule, freeze_rule
    from tests.conftest import compose_cfg

    default = experiment_rule(compose_cfg("experiment=tiny-demo").experiment)
    assert "speed" not in default  # at its default the rule is the one frozen before the key existed
    ledger = Ledger("tiny-demo", tmp_path)
    freeze_rule(ledger, default)
    strict = experiment_rule(compose_cfg("experiment=tiny-demo", "experiment.speed.confidence=0.99").experiment)
    assert strict["speed"] == {"confidence": 0.99}
    with pytest.raises(RuleChanged, match=r'speed: null -> \{"confidence": 0.99\}'):
        check_rule(ledger, strict)


@pytest.mark.slow
def test_the_plan_takes_the_confidence_of_the_rule_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    from assess.experiment import ExperimentError, load_experiment

    exp = load_experiment("tiny-demo", ["experiment.speed.confidence=0.8"], tmp_path / "outputs")
    assert Plan.from_experiment(exp).speed_confidence == 0.8
    assert Plan.from_experiment(load_experiment("tiny-demo", [], tmp_path / "other")).speed_confidence == 0.95
    with pytest.raises(ExperimentError, match=r"experiment.speed.confidence=1.5: must be in \[0.5, 1\)"):
        load_experiment("tiny-demo", ["experiment.speed.confidence=1.5"], tmp_path / "third")


def test_a_render_with_a_bad_confidence_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    from tests.conftest import run_render

    result = run_render("-m", "experiment=tiny-demo", "prompts=dev", "steps=2", "experiment.speed.confidence=2",
                        cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and "experiment.speed.confidence=2" in result.stderr
    assert not (tmp_path / "outputs" / "multirun").exists()


def test_side_by_side_rounds_decide_between_two_cells_within_noise_and_untimed_rivals_are_named() -> None:
    """Issue 27: within noise on their render-time latencies the climb names the rival it must time with the
    incumbent; once a session timed the two side by side, its rounds decide (a 20 % speed-up beyond its interval)."""
    a, b = noisy_twins()
    fast_worse, slow_better = cell(FAST_WORSE, -0.02, a), cell(SLOW_BETTER, -0.02, b)
    before = incumbent(fast_worse, slow_better)
    assert before.incumbent == FAST_WORSE and before.untimed == [SLOW_BETTER]
    assert any("never timed side by side" in r for r in before.reasons)
    rounds = (1 / 1.2, 1 / 1.25, 1 / 1.15, 20)  # latency(slow_better) / latency(fast_worse): 20 % faster
    timed = incumbent(cell(FAST_WORSE, -0.02, a, side_by_side={slow_better.cell_key: (1.2, 1.15, 1.25, 20)}),
                      cell(SLOW_BETTER, -0.02, b, side_by_side={fast_worse.cell_key: rounds}))
    assert timed.incumbent == SLOW_BETTER and timed.untimed == []
    assert timed.speed_rule.startswith("on speed: faster beyond noise than steps=4 cache=none") \
        and "side-by-side round(s)" in timed.speed_rule


def test_a_cell_that_reproduces_another_byte_for_byte_is_never_ranked_apart_from_it() -> None:
    a, b = noisy_twins()
    twin = cell(SLOW_BETTER, -0.02, a * 0.5, same_work_as=FAST_WORSE)  # the same images, its timing half: noise
    d = incumbent(cell(FAST_WORSE, -0.02, b), twin)
    assert d.incumbent == FAST_WORSE
    assert "same work: steps=4 cache=fbcache renders byte-identical images to steps=4 cache=none: one result, never " \
           "ranked apart on speed" in d.reasons


def test_within_noise_on_both_legs_of_several_cells_each_tied_cell_is_named_apart() -> None:
    a, b = noisy_twins()
    c, _ = noisy_twins(seed=4)  # a third draw of the same true speed
    d = incumbent(cell(FAST_WORSE, -0.02, a), cell(SLOW_BETTER, -0.02, b), cell(("4", "taylorseer"), -0.02, c))
    assert d.incumbent == FAST_WORSE
    assert d.speed_rule.endswith("within noise on quality too of steps=4 cache=fbcache, steps=4 cache=taylorseer: "
                                 "the lower median latency decided")
