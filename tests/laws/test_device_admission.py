"""Every device call is admitted and spent (issue 61, principle 3): a side-by-side timing session (`assess retime` by
hand, the climb's, the final's) goes through the same admission as a sweep, inside the experiment's budget and
reserve, and never times a holdout outside its final. The admission is decided from the runs' records before any
pipeline loads, so these tests read runs written through the contract (tests.assess.climb_fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from render.laws import Ledger
from render.laws.admission import BudgetExceeded, admitted_timing, session_seconds
from render.laws.holdout import HoldoutLocked
from render.laws.spend import RESERVATION_ENV
from render.rundir import load_run
from tests.assess.climb_fixtures import DemoRuns, demo_cell, dev_ids, holdout_ids, restore_hydra  # noqa: F401
from tests.laws.test_one_body import composed, launch  # noqa: F401  (composed: the module's rules, once)

pytestmark = pytest.mark.usefixtures("restore_hydra")

CELL_S, ANCHOR_S = 0.1, 0.6  # the runs' recorded seconds per call


def _dev_runs(out: Path) -> list:
    runs = DemoRuns(out.resolve())
    sweep = runs.sweep()
    return [load_run(runs.run(sweep, demo_cell(4), dev_ids(4), latency=CELL_S)),
            load_run(runs.anchor(dev_ids(4), latency=ANCHOR_S))]


def test_a_session_is_estimated_from_its_records() -> None:
    """Each cell: its load, then its warm-ups and rounds at its median recorded call."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        runs = _dev_runs(Path(folder) / "outputs")
        assert session_seconds(runs, 20) == pytest.approx(22 * (CELL_S + ANCHOR_S))


def test_retime_by_hand_is_refused_past_the_navigable_ceiling(tmp_path: Path) -> None:
    """The issue's route: `assess retime` by hand spent 17.9 s against a navigable ceiling of 6.2 s. Its session (20
    rounds of two cells: 15.4 s) is refused, nothing reserved; a budget that holds it admits it, reserves its estimate
    while it runs (its spend lines name the reservation) and releases it after."""
    ledger = launch(tmp_path / "outputs", "experiment.budget.gpu_hours=0.004", "experiment.budget.reserve_gpu_hours=0.0015")
    # 14.4 s, 5.4 s kept for the final, 2.8 s spent by the runs' samples: 6.2 s left for navigation
    runs = _dev_runs(tmp_path / "outputs")
    with pytest.raises(BudgetExceeded, match=r"assess retime needs an estimated 0\.0043 GPU-hours.*--rounds"):
        with admitted_timing([runs], 20, final=False, what="assess retime"):
            pytest.fail("admitted past the navigable ceiling")
    assert not ledger.entries("reservation")
    with admitted_timing([runs], 6, final=False, what="assess retime"):  # 6 rounds: 5.6 s
        (reservation,) = ledger.entries("reservation")
        assert __import__("os").environ[RESERVATION_ENV] == f"tiny-demo:{reservation['rid']}"
    assert [e["rid"] for e in ledger.entries("release")] == [reservation["rid"]]


def test_the_reserve_is_the_finals_own(tmp_path: Path) -> None:
    """A route of our own: a retime whose estimate fits the whole budget but not the navigable part is refused unless
    it is the final's own timing (which opens the reserve, as the final's token does for its renders)."""
    launch(tmp_path / "outputs", "experiment.budget.gpu_hours=0.006", "experiment.budget.reserve_gpu_hours=0.004")
    runs = _dev_runs(tmp_path / "outputs")  # 20 rounds: 15.4 s; 2.8 s spent of a navigable 7.2 s, the whole 21.6 s
    with pytest.raises(BudgetExceeded, match="reserve"):
        with admitted_timing([runs], 20, final=False, what="the climb's timing"):
            pass
    with admitted_timing([runs], 20, final=True, what="the final's timing"):
        pass


def test_retime_without_the_experiments_ledger_is_refused(tmp_path: Path) -> None:
    """A route of our own: runs of the experiment timed from a state folder whose ledger is not theirs (none frozen):
    there is no budget to admit it under, so it is refused, not run for free."""
    from render.laws.anchor import ExperimentGuard

    runs = _dev_runs(tmp_path / "outputs")
    with pytest.raises(ExperimentGuard, match="cannot be admitted against its budget"):
        with admitted_timing([runs], 6, final=False, what="assess retime"):
            pass
    assert not Ledger("tiny-demo", tmp_path / "outputs").entries()


def _final(out: Path, *, spent: bool) -> tuple[Ledger, list]:
    """The experiment's final: claimed on the holdout for the incumbent and the anchor, its holdout runs rendered,
    its token spent when `spent`."""
    from render.laws import claim_final, complete_final, content_hash, option_prompts, register_holdout

    ledger = launch(out)
    register_holdout(ledger, "holdout")
    runs = DemoRuns(out.resolve())
    sweep = runs.sweep()
    final = [load_run(runs.run(sweep, demo_cell(4), holdout_ids(3), split="holdout", final=True)),
             load_run(runs.anchor(holdout_ids(3), split="holdout", final=True))]
    _, holdout = option_prompts("holdout")
    claim = claim_final(ledger, {"cells": sorted({r.cell_key for r in final})}, content_hash(holdout), holdout)
    if spent:
        complete_final(ledger, claim, {"experiment": "tiny-demo", "claimed_at": claim["at"]})
    return ledger, final


def test_a_spent_holdout_is_never_timed_again(tmp_path: Path) -> None:
    """The issue's route: `assess retime` of the final's sweep after its token was spent made 14 pipeline calls on
    holdout texts. Refused, as its own timing would be."""
    _, final = _final(tmp_path / "outputs", spent=True)
    for purpose_is_final in (False, True):
        with pytest.raises(HoldoutLocked, match="locked holdout.*token is spent"):
            with admitted_timing([final], 20, final=purpose_is_final, what="assess retime"):
                pass


def test_an_open_final_is_timed_by_the_final_only(tmp_path: Path) -> None:
    """A route of our own: while the final's claim is open (a final that did not finish), `assess retime` by hand of
    its sweep is still refused; the final's own timing of the claim's cells is admitted (the reserve is its)."""
    _, final = _final(tmp_path / "outputs", spent=False)
    with pytest.raises(HoldoutLocked, match="locked holdout"):
        with admitted_timing([final], 20, final=False, what="assess retime"):
            pass
    with admitted_timing([final], 20, final=True, what="final timing"):
        pass


@pytest.mark.slow
def test_assess_retime_of_an_experiments_sweep_is_admitted(tiny_cache: Path, tmp_path: Path) -> None:
    """End to end: an experiment's sweep rendered on the tiny model, then `assess retime` by hand. Over what is left
    of the navigable budget it exits 2 before loading anything (before: it ran and spent past the ceiling); within
    it, it runs, and its session's spend names its reservation. Slow: real renders and a real session."""
    from click.testing import CliRunner

    from assess.cli import cli
    from render.cell import build_job
    from render.laws.admission import spent_gpu_seconds
    from render.laws.spend import spend_lines
    from render.rundir import SampleStore
    from render.run.runner import run_job
    from render.app import PIPELINES
    from tests.conftest import compose_cfg

    out = tmp_path / "outputs"
    ledger = launch(out, "experiment.budget.gpu_hours=0.15", "experiment.budget.reserve_gpu_hours=0.03")
    for steps in (2, 4):
        given = ["experiment=tiny-demo", "device=cpu", "prompts.limit=2", "seed=0", f"steps={steps}",
                 "render_anchor=true", f"out_root={out}"]
        job = build_job(compose_cfg(*given))
        results = run_job(job, out / "sweep" / f"steps-{steps}", store=SampleStore(out), pipelines=PIPELINES,
                          overrides=given)
        assert all(r.status == "done" for r in results), [r.message for r in results]
    # the ledger's budget brought down to what was spent and a little more: 20 rounds do not fit, 6 do
    spent = spent_gpu_seconds(ledger)
    db = str(tmp_path / "index.db")
    from render.laws import amend_rule, rule_in_force

    rule, _ = rule_in_force(ledger)
    runs = [load_run(p) for p in (out / "sweep").iterdir()] + [load_run(p) for p in (out / "anchors").rglob("run.json")
                                                                 for p in [p.parent]]
    six = session_seconds(runs, 6)
    amend_rule(ledger, {**rule, "budget": {**rule["budget"], "gpu_hours": (spent + 1.5 * six) / 3600,
                                           "reserve_gpu_hours": 0.0}}, "the issue's ceiling")
    refused = CliRunner().invoke(cli, ["retime", str(out / "sweep"), "--db", db, "--rounds", "20"])
    assert refused.exit_code == 2 and "assess retime (20 rounds" in refused.output, refused.output
    assert not [line for line in spend_lines(ledger) if line["what"] == "retime"]
    timed = CliRunner().invoke(cli, ["retime", str(out / "sweep"), "--db", db, "--rounds", "6"])
    assert timed.exit_code == 0, timed.output
    (reservation,) = [e for e in ledger.entries("reservation") if e.get("what", "").startswith("assess retime")]
    assert {line["rid"] for line in spend_lines(ledger) if line["what"] == "retime"} == {reservation["rid"]}
