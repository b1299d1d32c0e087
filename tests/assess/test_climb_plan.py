"""`assess climb <experiment> --plan` (issue 63, item 2): before anything runs, each rung's and the final's cells,
samples and estimated GPU-hours, the reserve, and whether the budget fits, with how much more it needs when not."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli

DEMO_STEPS = [16, 8, 32, 16, 16, 16]  # the demo's start (16 steps) and its one-factor neighbours at the first rung


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("HYPERGRID_LOCK", str(tmp_path / "lock" / "holdout-lock.jsonl"))
    return tmp_path


def _plan(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["climb", "demo", *args])
    return result.exit_code, result.output


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def test_the_plan_is_the_climbs_first_decision_carried_through_successive_halving(fresh: Path) -> None:
    from assess.climb.planning import climb_plan

    plan = climb_plan("demo", seconds_per_step=0.01)
    rows = [(s.cells, s.samples) for s in [*plan.stages, plan.final]]
    # rungs of 4, 12, 36 dev prompts, eta 3: 6 cells, then ceil(6/3) = 2 on 8 new prompts, then 1 on 24; the anchor on
    # the top rung's 36; the final's incumbent, control and anchor on the 30 holdout prompts
    assert rows == [(6, 24), (2, 16), (1, 24), (1, 36), (3, 90)], rows
    assert plan.first[0] == "steps=16 cache=none scheduler=default", "the start first, then its neighbours"
    rung1 = sum(DEMO_STEPS) * 4 * 0.01
    assert plan.stages[0].seconds == pytest.approx(rung1), "each cell's steps x its samples x the cost of a step"
    assert plan.stages[1].seconds == pytest.approx((32 + 16) * 8 * 0.01), "the costliest promoted: a cautious plan"
    assert plan.final.seconds == pytest.approx((16 + 16 + 32) * 30 * 0.01)
    assert plan.pass_s == pytest.approx(sum(s.seconds for s in plan.stages))


def test_a_plan_that_fits_says_so_and_keeps_the_finals_share(fresh: Path) -> None:
    code, out = _plan("--plan", "--seconds-per-step", "0.01")
    assert code == 0, out
    assert "nothing has run" in out.splitlines()[0]
    assert re.search(r"^  rung 1: 4 prompts x 1 seed\(s\) +6 cell\(s\) +24 sample\(s\) +\S+ GPU-h", out, re.M), out
    assert re.search(r"kept back from the start: 0\.05 GPU-h \(\d+ s\) \(the larger of the reserve", out), \
        "the reserve, larger than the final's estimate"
    assert out.splitlines()[-1].startswith("answer: fits: one pass takes"), out


@pytest.mark.long("two plans, each composing the experiment (about a second each on 2 busy cores)")
def test_a_plan_that_does_not_fit_says_how_much_more_and_that_figure_fits(fresh: Path) -> None:
    code, out = _plan("--plan", "--seconds-per-step", "2")
    assert code == 0, out
    answer = out.splitlines()[-1]
    match = re.search(r"does not fit: one pass and the final need (\S+) GPU-h more .*experiment\.budget\.gpu_hours=(\S+) "
                      r"or more", answer)
    assert match, answer
    code, out = _plan("--plan", "--seconds-per-step", "2", "--set", f"experiment.budget.gpu_hours={match[2]}")
    assert code == 0 and out.splitlines()[-1].startswith("answer: fits"), out


def test_the_plan_reads_and_writes_nothing(fresh: Path) -> None:
    before = _files(fresh)
    code, out = _plan("--plan", "--seconds-per-step", "0.01")
    assert code == 0, out
    assert _files(fresh) == before, "no ledger, no state, no outputs: a plan is not a launch"


def test_without_history_or_a_step_cost_the_plan_counts_and_says_how_to_get_the_seconds(fresh: Path) -> None:
    code, out = _plan("--plan")
    assert code == 0, out
    assert "? GPU-h" in out and "no render of shapes at 32x32 on cpu yet" in out, out
    assert "python -m render model=shapes height=32 width=32 prompts.limit=3" in out.splitlines()[-1], out


def test_with_history_each_sample_is_costed_as_the_admission_law_costs_it(fresh: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import render.laws.admission as admission
    from assess.climb.planning import climb_plan

    calls: list[tuple[str, int, int, str, int]] = []

    def per_sample(history, model, height, width, device_kind, steps, cell_key=None):  # type: ignore[no-untyped-def]
        calls.append((model, height, width, device_kind, steps))
        return 0.5 + 0.1 * steps

    monkeypatch.setattr(admission, "seconds_per_sample", per_sample)
    plan = climb_plan("demo")
    assert "costed from shapes's renders at 32x32 on cpu" in plan.source
    assert ("shapes", 32, 32, "cpu", 32) in calls, "the model, its resolution and device kind, each cell's steps"
    assert plan.stages[0].seconds == pytest.approx(sum(0.5 + 0.1 * s for s in DEMO_STEPS) * 4)


@pytest.mark.parametrize("args,says", [
    (["--seconds-per-step", "0.1"], "--seconds-per-step goes with --plan"),
    (["--plan", "--apply"], "--plan only reads"),
    (["--plan", "--seconds-per-step", "0"], "0"),
    (["--plan", "--seconds-per-step", "x"], "x"),
])
def test_bad_plan_options_are_refused_naming_the_value(fresh: Path, args: list[str], says: str) -> None:
    code, out = _plan(*args)
    assert code == 2 and says in out, out
    assert not (fresh / "outputs").exists() and not os.path.exists(fresh / "state")
