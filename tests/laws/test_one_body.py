"""One experiment, one body of evidence (issue 44): the laws hold across state folders, output roots and lost
ledgers. Each test takes one route that broke the law before, and sees it held or refused with its reason.

Evidence is built through the project's own contract modules (render.laws, render.rundir) and the climb's plain
functions, so these tests stay in the default tier."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from render.laws import Ledger, experiment_rule, freeze_rule
from tests.assess.climb_fixtures import restore_hydra  # noqa: F401  (the fixture)
from tests.conftest import compose_cfg

pytestmark = pytest.mark.usefixtures("restore_hydra")


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder: the experiment's default out_root `outputs` lies in it."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@functools.lru_cache(maxsize=None)
def _rule(*overrides: str) -> str:
    """The experiment's decision rule for these overrides, composed once per module (a composition is ~0.2 s)."""
    return json.dumps(experiment_rule(compose_cfg("experiment=tiny-demo", *overrides).experiment))


@pytest.fixture(scope="module", autouse=True)
def composed() -> None:
    """Hydra's first composition and the rules these tests freeze, paid once for the module (a shared fixture)."""
    from tests.assess.climb_fixtures import hydra_state_kept

    with hydra_state_kept():
        for band in ("0.5", "0.001", "0.002"):
            _rule(f"experiment.quality.band={band}")
        _rule()


def launch(out_root: Path, *overrides: str) -> Ledger:
    """What an experiment's first launch records (render.laws.record_launch): the copies, the frozen rule."""
    ledger = Ledger("tiny-demo", out_root)
    ledger.sync()
    freeze_rule(ledger, json.loads(_rule(*overrides)))
    return ledger


def generation(ledger: Ledger, band: float, number: int = 1, *, stamped: bool = True, decided: bool = True) -> Path:
    """A generation record as the climb writes it (assess.climb.archive), with what these laws read of it: the ledger
    it was decided under (assess.climb.generation.make_record) and its rule's quality."""
    from assess.climb.archive import write_generation
    from render.laws.ledger import ledger_stamp

    record = {"generation": number, "experiment": ledger.name,
              "rule": {"quality": {"metric": "ssim", "band": band, "alpha": 0.05, "test": "noninferiority"}},
              "cells": [{"cell": {"steps": "4"}, "rung": 4, "verdict": "parity"}] if decided else [],
              **({"ledger": ledger_stamp(ledger)} if stamped else {})}
    return write_generation(ledger.out_root, ledger.name, record)


# -- route 1: the ledger's copies deleted, then the band changed -------------------------------------


def test_a_lost_ledger_refuses_the_next_generation(workdir: Path) -> None:
    """Route 1, in the default tier: a generation record (as the climb writes it) names the ledger it was decided
    under; both copies deleted, then `assess climb --set experiment.quality.band=0.001`: refused, how to restore."""
    ledger = launch(workdir / "outputs", "experiment.quality.band=0.5")
    generation(ledger, 0.5)
    for path in ledger.copies():
        path.unlink()
    refused = invoke("climb", "tiny-demo", "--db", str(workdir / "index.db"), "--set", "experiment.quality.band=0.001")
    assert refused.exit_code != 0 and "no copy of its ledger is left" in refused.output, refused.output
    assert "generation 1" in refused.output and str(ledger.state_copy) in refused.output
    assert not (workdir / "outputs/experiments/tiny-demo/generations/g0002.json").exists()
    assert not any(path.exists() for path in ledger.copies())


@pytest.mark.slow
def test_a_lost_ledger_is_refused_not_restarted_and_the_band_does_not_change(workdir: Path) -> None:
    """Both ledger copies deleted, then the band changed from 0.5 to 0.001: before, the next generation took the
    new band with no amendment recorded. Now the generation records (which name the ledger head they were decided
    under and the band) are evidence that a ledger existed: the climb refuses, saying how to restore it. Slow: two
    real climbs (three Hydra compositions each) on top of the launch, over the default tier's 2 s."""
    db = workdir / "index.db"
    ledger = launch(workdir / "outputs", "experiment.quality.band=0.5")
    first = invoke("climb", "tiny-demo", "--db", str(db), "--set", "experiment.quality.band=0.5")
    assert first.exit_code == 0, first.output
    record = json.loads((workdir / "outputs/experiments/tiny-demo/generations/g0001.json").read_text())
    assert record["ledger"]["head"] and record["ledger"]["origin"] and record["rule"]["quality"]["band"] == 0.5
    copies = ledger.copies()
    for path in copies:
        path.unlink()
    second = invoke("climb", "tiny-demo", "--db", str(db), "--set", "experiment.quality.band=0.001")
    assert second.exit_code != 0
    assert "no copy of its ledger is left" in second.output, second.output
    assert "generation 1" in second.output and "Restore it" in second.output
    assert not (workdir / "outputs/experiments/tiny-demo/generations/g0002.json").exists()  # nothing decided
    assert not any(path.exists() for path in copies)  # nor restarted


def test_an_amendment_cannot_restart_a_lost_ledger(workdir: Path) -> None:
    """`--amend` on a lost ledger would freeze the new band as the first rule: refused alike."""
    from assess.experiment import ExperimentError, load_experiment

    ledger = launch(workdir / "outputs", "experiment.quality.band=0.5")
    generation(ledger, 0.5)
    for path in ledger.copies():
        path.unlink()
    with pytest.raises(ExperimentError, match="no copy of its ledger is left"):
        load_experiment("tiny-demo", ["experiment.quality.band=0.001"], amend="tighter")
    assert not any(path.exists() for path in ledger.copies())


def test_a_kept_copy_restores_the_ledger_and_the_climb_goes_on(workdir: Path) -> None:
    """The refusal's remedy works: the ledger put back where the message says, and the experiment loads again."""
    from assess.experiment import load_experiment
    from render.laws.evidence import check_ledger_held, traces
    from render.laws import ExperimentGuard

    ledger = launch(workdir / "outputs")
    generation(ledger, 0.002)
    backup = ledger.state_copy.read_bytes()
    for path in ledger.copies():
        path.unlink()
    with pytest.raises(ExperimentGuard, match="no copy of its ledger is left") as refused:
        check_ledger_held(ledger, traces(ledger))
    assert str(ledger.state_copy) in str(refused.value)
    ledger.state_copy.write_bytes(backup)
    assert load_experiment("tiny-demo").quality.band == 0.002


def test_a_fresh_ledger_under_the_old_evidence_is_refused(workdir: Path) -> None:
    """The copies deleted and a new rule frozen in their place (a launch of a version before this one, or by
    hand): the generation records name a head this chain never had, and another band. Refused, not climbed."""
    from assess.experiment import ExperimentError, load_experiment

    ledger = launch(workdir / "outputs", "experiment.quality.band=0.5")
    generation(ledger, 0.5)
    for path in ledger.copies():
        path.unlink()
    launch(workdir / "outputs", "experiment.quality.band=0.001")
    with pytest.raises(ExperimentError, match="a ledger head this ledger never had"):
        load_experiment("tiny-demo", ["experiment.quality.band=0.001"])


def test_a_changed_band_with_no_ledger_and_old_generations_is_refused(workdir: Path) -> None:
    """Generation records written before they named a ledger head (an older version) still say the band they were
    decided under: with no ledger, another band is refused, naming both values; the same band goes on."""
    from assess.experiment import ExperimentError, load_experiment
    from render.laws.evidence import check_ledger_held, traces

    ledger = Ledger("tiny-demo", workdir / "outputs")
    generation(ledger, 0.5, stamped=False)
    with pytest.raises(ExperimentError, match="quality.band: 0.5 -> 0.001"):
        load_experiment("tiny-demo", ["experiment.quality.band=0.001"])
    check_ledger_held(ledger, traces(ledger), {"quality": {"metric": "ssim", "band": 0.5, "alpha": 0.05,
                                                           "test": "noninferiority"}})


def test_a_first_generation_that_decided_nothing_does_not_hold_the_band(workdir: Path) -> None:
    """Nothing honest is refused: `assess climb` before any render records generation 1 under the config's band;
    the band edited before the first launch freezes the new one. No evidence was gathered under the old band."""
    from render.laws.evidence import check_ledger_held, traces

    ledger = Ledger("tiny-demo", workdir / "outputs")
    generation(ledger, 0.5, stamped=False, decided=False)
    launch(workdir / "outputs", "experiment.quality.band=0.001")
    check_ledger_held(ledger, traces(ledger))


def test_an_honest_amendment_still_changes_the_band(workdir: Path) -> None:
    """Nothing honest is refused: with the ledger in place, an amendment changes the band, and the experiment goes
    on under it with the old generations' band among the ledger's versions."""
    from assess.experiment import load_experiment
    from render.laws import amend_rule

    ledger = launch(workdir / "outputs", "experiment.quality.band=0.5")
    generation(ledger, 0.5)
    amend_rule(ledger, json.loads(_rule("experiment.quality.band=0.001")), "tighter")
    generation(ledger, 0.001, number=2)
    assert load_experiment("tiny-demo", ["experiment.quality.band=0.001"]).quality.band == 0.001


# -- the holdout and the final, locked by content wherever they are -------------------------------------


def _claimed(out_root: Path, name: str = "tiny-demo") -> tuple[Ledger, list]:
    from render.laws import claim_final, content_hash, option_prompts, register_holdout

    ledger = launch(out_root) if name == "tiny-demo" else Ledger(name, out_root)
    register_holdout(ledger, "holdout")
    _, holdout = option_prompts("holdout")
    claim_final(ledger, {"cells": []}, content_hash(holdout), holdout)
    return ledger, holdout


def test_a_fresh_state_folder_and_a_new_out_root_cannot_claim_a_second_final(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Alice's final is claimed (her state folder, her out_root). Bob, with a fresh state folder and a new out_root,
    sees none of her ledger: before, he claimed a second final of the same experiment on the same holdout. The
    machine-wide lock (beside the user's cache) names her claim: refused."""
    from render.laws import FinalAlreadyClaimed, claim_final, content_hash, option_prompts, register_holdout
    from render.laws.lock import machine_lock

    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "alice"))
    _claimed(tmp_path / "alice-out")
    assert machine_lock().is_file() and "tiny-demo" in machine_lock().read_text()
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "bob"))
    bob = launch(tmp_path / "bob-out")
    register_holdout(bob, "holdout")
    _, holdout = option_prompts("holdout")
    with pytest.raises(FinalAlreadyClaimed, match="this experiment's name under another ledger") as refused:
        claim_final(bob, {"cells": []}, content_hash(holdout), holdout)
    assert str(machine_lock()) in str(refused.value) and "fresh holdout manifest" in str(refused.value)
    assert bob.first("claim") is None
    # another experiment name, in a third state folder and out_root: refused alike
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "carol"))
    carol = Ledger("renamed-demo", tmp_path / "carol-out")
    register_holdout(carol, "holdout")
    with pytest.raises(FinalAlreadyClaimed, match="experiment tiny-demo claimed its final"):
        claim_final(carol, {"cells": []}, content_hash(holdout), holdout)


def test_the_out_roots_lock_holds_without_the_machines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock is also kept in every out_root the experiment touched: a colleague on another machine (another
    machine-wide lock) who launches into that out_root from a fresh state folder, after the experiment's folder
    there was deleted (no ledger copy left to read), cannot claim either."""
    import shutil

    from render.laws import FinalAlreadyClaimed, claim_final, content_hash, register_holdout

    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "alice"))
    _, holdout = _claimed(tmp_path / "shared")
    shutil.rmtree(tmp_path / "shared" / "experiments")
    monkeypatch.setenv("HYPERGRID_LOCK", str(tmp_path / "another-machine" / "lock.jsonl"))
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "bob"))
    bob = Ledger("renamed-demo", tmp_path / "shared")
    register_holdout(bob, "holdout")
    with pytest.raises(FinalAlreadyClaimed, match="holdout-lock.jsonl"):
        claim_final(bob, {"cells": []}, content_hash(holdout), holdout)


def test_a_second_name_given_the_first_ones_ledger_has_no_final_of_its_own(tmp_path: Path) -> None:
    """The first experiment's folder (ledger, final-result.json) copied under a second name: before, the second
    reported the first one's final as its own (the copied final-result.json read as its old layout). A record that
    names another experiment is not read as this one's, and the second cannot claim the spent holdout either."""
    import shutil

    from render.laws import FinalAlreadyClaimed, claim_final, complete_final, content_hash, final_result
    from render.laws.ledger import user_state_dir

    first, holdout = _claimed(tmp_path / "outputs")
    claim = first.first("claim")
    result = {"experiment": "tiny-demo", "claimed_at": claim["at"], "parity": "parity"}
    complete_final(first, claim, result)
    (tmp_path / "outputs/experiments/tiny-demo/final-result.json").write_text(json.dumps(result))
    for base in (user_state_dir(), tmp_path / "outputs"):
        shutil.copytree(base / "experiments" / "tiny-demo", base / "experiments" / "second-demo")
    second = Ledger("second-demo", tmp_path / "outputs")
    assert final_result(first) == result
    assert final_result(second) is None and second.first("claim") is None
    with pytest.raises(FinalAlreadyClaimed, match="tiny-demo"):
        claim_final(second, {"cells": []}, content_hash(holdout), holdout)


def test_a_holdout_preview_in_the_shared_index_blocks_the_final(workdir: Path, monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    """Bob (another state folder, his own out_root) rendered holdout samples and scored them into the shared index:
    before, Alice's final was still claimed and rendered on the same holdout (her out_roots hold none of them). The
    final's evidence reads the index's samples too, by holdout identity: no final can be claimed."""
    from assess.climb.run_final import holdout_evidence
    from assess.experiment import load_experiment
    from assess.index.database import Index
    from assess.scoring.ingest import score
    from tests.assess.climb_fixtures import DemoRuns, demo_cell, holdout_ids

    db = workdir / "index.db"
    launch(workdir / "outputs")
    bob = DemoRuns((workdir / "bob-out").resolve())
    preview = bob.run(bob.sweep(), demo_cell(4), holdout_ids(2), split="holdout")
    score([preview], db, metrics=[])
    exp = load_experiment("tiny-demo")
    with Index.open(db) as index:
        found = holdout_evidence(exp, index)
    assert found is not None and "contaminated" in found and str(preview) in found, found


# -- evidence names its experiment; spend is everything the evidence cost -----------------------------


def _observed(db: Path):
    from assess.climb.observe import observe, sync_run_experiments
    from assess.experiment import load_experiment
    from assess.index.database import Index

    exp = load_experiment("tiny-demo")
    with Index.open(db) as index:
        sync_run_experiments(index)
        return exp, observe(index, exp)


def test_another_state_folders_runs_are_kept_apart_not_navigated_on(workdir: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Two state folders of one experiment: Bob's ledger (his state folder, his out_root) is another chain, and his
    run.json names its head. Before, Alice's climb navigated on Bob's samples (scored into the shared index) while
    her budget counted only her own spend log. Now his run is kept apart: listed as such, never ranked, not in her
    budget."""
    from assess.climb.generation import budget_state
    from assess.scoring.ingest import score
    from tests.assess.climb_fixtures import DemoRuns, demo_cell, dev_ids

    db = workdir / "index.db"
    launch(workdir / "outputs")
    mine = DemoRuns((workdir / "outputs").resolve())
    sweep = mine.sweep()
    mine.run(sweep, demo_cell(8), dev_ids(4), latency=0.3)
    mine.anchor(dev_ids(4), latency=0.6)
    alice_state = Path(str(__import__("os").environ["HYPERGRID_STATE"]))
    monkeypatch.setenv("HYPERGRID_STATE", str(workdir / "bob-state"))
    bob = launch(workdir / "bob-out")
    theirs = DemoRuns((workdir / "bob-out").resolve())
    other = theirs.sweep()
    run = theirs.run(other, demo_cell(4), dev_ids(4), latency=0.15)
    record = json.loads((run / "run.json").read_text())
    chain = bob.reconciled().chain  # what Bob's renderer records (render.laws.ledger.ledger_stamp)
    stamp = {"experiment": "tiny-demo", "origin": chain[0]["hash"], "head": chain[-1]["hash"]}
    (run / "run.json").write_text(json.dumps({**record, "ledger": stamp}))
    monkeypatch.setenv("HYPERGRID_STATE", str(alice_state))
    score([sweep, other], db, metrics=[])
    exp, observed = _observed(db)
    assert ("8", "none", "default") in observed.cells
    assert ("4", "none", "default") not in observed.cells  # Bob's cell: not navigated on
    assert any(str(run) in line and "kept apart" in line for line in observed.ignored), observed.ignored
    assert str(run) not in observed.run_paths
    assert budget_state(exp, observed).spent_s == pytest.approx(4 * 0.3 + 4 * 0.6)  # Alice's evidence, all of it


def test_anchor_samples_rendered_outside_the_experiment_are_spent_by_it(workdir: Path) -> None:
    """A stated limit: anchor samples rendered by a run outside the experiment (its run.json names none) cost the
    experiment nothing, though every comparison reads them. Now the samples the climb uses as evidence are spent,
    whoever rendered them, once each at their recorded cost, and written to the spend log: the renderer's
    admission reads the same spend as the climb."""
    from assess.climb.generation import budget_state
    from assess.scoring.ingest import score
    from render.laws.admission import History, spent_gpu_seconds
    from tests.assess.climb_fixtures import DemoRuns, demo_cell, dev_ids

    db = workdir / "index.db"
    ledger = launch(workdir / "outputs")
    runs = DemoRuns((workdir / "outputs").resolve())
    sweep = runs.sweep()
    runs.run(sweep, demo_cell(8), dev_ids(4), latency=0.3)
    anchor = runs.anchor(dev_ids(4), latency=0.6)
    record = json.loads((anchor / "run.json").read_text())
    (anchor / "run.json").write_text(json.dumps({**record, "config": {}}))  # rendered outside any experiment
    score([sweep], db, metrics=[])
    exp, observed = _observed(db)
    spent = budget_state(exp, observed).spent_s
    assert spent == pytest.approx(4 * 0.3 + 4 * 0.6)
    assert spent_gpu_seconds(ledger, History.scan(ledger.out_roots())) == pytest.approx(spent)  # the render side's
    assert budget_state(exp, observed).spent_s == pytest.approx(spent)  # recorded once, not again
    assert observed.anchor_key in {k for k, _, _ in observed.evidence}


def test_a_launch_names_its_experiment_and_ledger_head_in_run_json_and_spend(tmp_path: Path) -> None:
    """A stated limit: a run launched under another rule from a state folder the ledger never saw was taken as the
    experiment's, since run.json recorded no ledger head. Now the renderer's run.json and every spend line name the
    experiment's identity (its chain's first digest) and the head in force at launch; the climb keeps a run whose
    head its chain never had apart (test_another_state_folders_runs_are_kept_apart_not_navigated_on)."""
    from render.cell import build_job
    from render.laws.spend import Purpose, record_spend, spend_lines
    from render.run.runner import run_record

    out = tmp_path / "outputs"
    ledger = launch(out)
    chain = ledger.reconciled().chain
    job = build_job(compose_cfg("experiment=tiny-demo", "prompts.limit=1", "seed=0", "steps=2", out_root=out))
    stamp = run_record(job, [], "basic", {}).ledger
    assert stamp == {"experiment": "tiny-demo", "origin": chain[0]["hash"], "head": chain[-1]["hash"]}
    record_spend(ledger, 1.0, Purpose.SAMPLE, sample=(job.cell.key, "t", 0))
    assert spend_lines(ledger)[0]["ledger"]["origin"] == chain[0]["hash"]
    outside = build_job(compose_cfg("prompts.limit=1", "seed=0", "steps=2", out_root=out))
    assert run_record(outside, [], "basic", {}).ledger == {}  # outside any experiment: nothing to name


def test_index_rows_naming_the_experiment_are_evidence_of_its_ledger(workdir: Path) -> None:
    """The experiment's runs that only the shared index knows (rendered into another out_root) name the ledger they
    were launched under: with every copy of it deleted, the climb refuses instead of starting over on them."""
    from assess.scoring.ingest import score
    from tests.assess.climb_fixtures import DemoRuns, demo_cell, dev_ids

    db = workdir / "index.db"
    ledger = launch(workdir / "outputs")
    chain = ledger.reconciled().chain
    elsewhere = DemoRuns((workdir / "elsewhere").resolve())
    sweep = elsewhere.sweep()
    run = elsewhere.run(sweep, demo_cell(8), dev_ids(4), latency=0.3)
    record = json.loads((run / "run.json").read_text())
    stamp = {"experiment": "tiny-demo", "origin": chain[0]["hash"], "head": chain[-1]["hash"]}
    (run / "run.json").write_text(json.dumps({**record, "ledger": stamp}))
    elsewhere.anchor(dev_ids(4))
    score([sweep], db, metrics=[])
    for path in ledger.copies():
        path.unlink()
    refused = invoke("climb", "tiny-demo", "--db", str(db))
    assert refused.exit_code != 0 and "no copy of its ledger is left" in refused.output, refused.output
    assert str(run) in refused.output


# -- what stop 51 left: runs with no head, samples read by cell key, each sample's own stamp ------------------


def stamped(run: Path, stamp: dict, *, started_at: str | None = None, samples: dict | None = None) -> Path:
    """Give a fixture run the ledger stamp its launch would record in run.json (and, `samples`, in its sample
    records: prompt id -> that record's own stamp)."""
    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**record, "ledger": stamp,
                                              **({"started_at": started_at} if started_at else {})}))
    if samples:
        lines = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
        (run / "samples.jsonl").write_text("".join(
            json.dumps({**line, "ledger": samples.get(line["prompt_id"], line.get("ledger"))}) + "\n" for line in lines))
    return run


def head_of(ledger: Ledger) -> dict:
    chain = ledger.reconciled().chain
    return {"experiment": ledger.name, "origin": chain[0]["hash"], "head": chain[-1]["hash"]}


def test_a_run_naming_no_head_launched_after_the_ledger_began_is_kept_apart(workdir: Path) -> None:
    """A stated limit: a run that names no ledger head was taken as the experiment's, so a run written by hand (or by
    a renderer that did not name the ledger) counted. Now one launched after the chain began is kept apart; one
    launched before it (an older version's run) is still taken, on its anchor."""
    from assess.scoring.ingest import score
    from tests.assess.climb_fixtures import DemoRuns, demo_cell, dev_ids

    db = workdir / "index.db"
    launch(workdir / "outputs")
    runs = DemoRuns((workdir / "outputs").resolve())
    sweep = runs.sweep()
    older = runs.run(sweep, demo_cell(8), dev_ids(4), latency=0.3)  # started 2026-11-30: before this chain began
    late = stamped(runs.run(sweep, demo_cell(4), dev_ids(4), latency=0.1), {}, started_at="2099-01-01T00:00:00+00:00")
    runs.anchor(dev_ids(4))
    score([sweep], db, metrics=[])
    _, observed = _observed(db)
    assert ("8", "none", "default") in observed.cells, observed.ignored
    assert ("4", "none", "default") not in observed.cells
    assert any(str(late) in line and "names no ledger head" in line and "kept apart" in line
               for line in observed.ignored), observed.ignored
    assert str(older) in observed.run_paths and str(late) not in observed.run_paths


def test_a_kept_apart_runs_samples_are_not_read_through_a_shared_cell_key(workdir: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A stated limit: the climb read a cell's samples by cell key, so a kept-apart run of the same cell as one of the
    experiment's lent it its samples (Bob's 4 prompts behind Alice's 2). Now only the samples the experiment's runs
    hold under its ledger are read: Alice's cell has her 2 prompts, and Bob's 2 others are neither navigated on nor
    spent, on the climb's side or the renderer's."""
    from assess.climb.generation import budget_state
    from assess.scoring.ingest import score
    from render.laws.admission import History, spent_gpu_seconds
    from render.rundir import sample_text_hash
    from tests.assess.climb_fixtures import DemoRuns, demo_cell, dev_ids

    db = workdir / "index.db"
    ledger = launch(workdir / "outputs")
    mine = DemoRuns((workdir / "outputs").resolve())
    sweep = mine.sweep()
    stamped(mine.run(sweep, demo_cell(8), dev_ids(2), latency=0.3), head_of(ledger))
    stamped(mine.anchor(dev_ids(4), latency=0.6), head_of(ledger))
    bob = {"experiment": "tiny-demo", "origin": "f" * 64, "head": "e" * 64}  # another state folder's chain
    theirs = stamped(mine.run(mine.sweep(), demo_cell(8), dev_ids(4), latency=0.3, name="bob"), bob)
    score([sweep, theirs.parent], db, metrics=[])
    exp, observed = _observed(db)
    cell = observed.cells[("8", "none", "default")]
    assert cell.rendered == frozenset(dev_ids(2)), cell.rendered  # (the warm-up is the first: no latency of it)
    assert {p for k, p, _ in observed.evidence if k == cell.cell_key} == {sample_text_hash(t) for t in exp.dev.texts[:2]}
    assert any(str(theirs) in line and "another ledger" in line for line in observed.ignored), observed.ignored
    expected = 2 * 0.3 + 4 * 0.6
    assert spent_gpu_seconds(ledger, History.scan(ledger.out_roots())) == pytest.approx(expected)  # the renderer's
    assert budget_state(exp, observed).spent_s == pytest.approx(expected)  # the climb's: the same


def test_a_sample_record_names_its_own_ledger_head_and_a_resumed_runs_foreign_samples_are_apart(workdir: Path) -> None:
    """A stated limit: sample records had no stamp of their own, so a run resumed by a launch under another ledger
    (its run.json naming this one's head) passed its foreign samples off as this ledger's. Now a record's own head
    decides for it: the foreign ones are not read, nor spent here."""
    from assess.scoring.ingest import score
    from render.laws.admission import History, spent_gpu_seconds
    from tests.assess.climb_fixtures import DemoRuns, demo_cell, dev_ids

    db = workdir / "index.db"
    ledger = launch(workdir / "outputs")
    runs = DemoRuns((workdir / "outputs").resolve())
    sweep = runs.sweep()
    foreign = {"experiment": "tiny-demo", "origin": "f" * 64, "head": "e" * 64}
    stamped(runs.run(sweep, demo_cell(8), dev_ids(4), latency=0.3), head_of(ledger),
            samples={"dev-002": foreign, "dev-003": foreign})
    stamped(runs.anchor(dev_ids(4), latency=0.6), head_of(ledger))
    score([sweep], db, metrics=[])
    _, observed = _observed(db)
    assert observed.cells[("8", "none", "default")].rendered == frozenset(dev_ids(2))
    assert spent_gpu_seconds(ledger, History.scan(ledger.out_roots())) == pytest.approx(2 * 0.3 + 4 * 0.6)


def test_the_dev_split_is_matched_by_the_exact_texts_hash_as_the_index_keys_samples() -> None:
    """Noticed in stop 51: the climb matched samples to its dev prompts by the folded text's hash while the index keys
    them by the exact text's, so a prompt with a capital or a full stop was never rendered in the climb's eyes."""
    from types import SimpleNamespace

    from assess.climb.observe import split_ids
    from render.rundir import sample_text_hash

    texts = ("A Red Circle.", "a blue square")
    split = SimpleNamespace(split="dev", ids=("p0", "p1"), texts=texts)
    exp = SimpleNamespace(dev=split, holdout=SimpleNamespace(split="holdout", ids=(), texts=()))
    assert split_ids(exp, "dev") == {sample_text_hash(texts[0]): "p0", sample_text_hash(texts[1]): "p1"}  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_renderer_stamps_each_sample_record_a_linked_one_with_its_own_launch(tmp_path: Path, tiny_cache: Path) -> None:
    """Item 1 through the renderer: every sample record names the ledger head of the launch that wrote it, as its
    run.json does; a sample linked from an earlier run names the linking launch's, not its renderer's."""
    from tests.conftest import run_render

    args = ["experiment=tiny-demo", "model=tiny", "prompts.limit=2", "seed=0", "steps=2", "render_anchor=false"]
    for tag in ("first", "second"):
        result = run_render(*args, f"tag={tag}", cwd=tmp_path, timeout=300)
        assert result.returncode == 0, result.stderr
    runs = sorted({p.parent for p in (tmp_path / "outputs").rglob("samples.jsonl")},
                  key=lambda p: json.loads((p / "run.json").read_text())["started_at"])
    assert len(runs) == 2, runs
    for run in runs:
        stamp = json.loads((run / "run.json").read_text())["ledger"]
        assert stamp["experiment"] == "tiny-demo" and stamp["head"], stamp
        records = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
        assert records and all(r["ledger"] == stamp for r in records), (stamp, records)
    linked = [json.loads(line) for line in (runs[1] / "samples.jsonl").read_text().splitlines()]
    assert all(r["reused_from"] for r in linked), linked  # the second launch rendered nothing: it linked


def test_a_final_in_the_index_blocks_another_names_final_on_the_same_holdout(workdir: Path) -> None:
    """A stated limit: the index's `finals` were matched by experiment name, so a final recorded there (its ledger
    copies and lock lines gone) did not stop another name's final on the same holdout texts. Now the index keeps a
    final's holdout by text identity, and any experiment whose holdout shares one of them finds it spent."""
    from assess.climb.run_final import holdout_evidence
    from assess.climb.archive import sync_index
    from assess.experiment import load_experiment
    from assess.index.database import Index
    from render.rundir import holdout_identity

    launch(workdir / "outputs")
    exp = load_experiment("tiny-demo")
    with Index.open(workdir / "index.db") as index:
        assert holdout_evidence(exp, index) is None
        sync_index(index, "renamed-demo", [], {"claimed_at": "2026-12-01T00:00:00+00:00", "incumbent": {"cell": {}}},
                   workdir / "elsewhere" / "ledger.jsonl", [holdout_identity(exp.holdout.texts[3])])
        found = holdout_evidence(exp, index)
    assert found is not None and "renamed-demo" in found and "1 of its holdout texts" in found, found
