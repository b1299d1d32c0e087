"""Evidence from every place it lives (issue 28, item 2): runs that name an experiment but that its ledger cannot
account for are refused or adopted by a recorded entry, never ranked silently nor left out of the budget; the holdout
is spent per content, whatever the experiment is called."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from assess.climb.generation import StrangerRuns, _observe, budget_state
from assess.experiment import load_experiment
from assess.index.database import Index
from assess.scoring.ingest import score
from render.laws import Ledger, claim_final, experiment_rule, freeze_rule, option_prompts, register_holdout
from render.laws.admission import History, spent_gpu_seconds
from render.laws.evidence import adopt, check_evidence, strangers
from render.laws.final import FinalAlreadyClaimed
from render.laws.holdout import content_hash, spent_elsewhere
from render.rundir import cell_key_of
from tests.assess.climb_fixtures import (ANCHOR_CELL, ANCHOR_KEY, DemoRuns, demo_cell, dev_ids,
                                         restore_hydra)  # noqa: F401  (the fixture)
from tests.assess.conftest import shift
from tests.conftest import compose_cfg

pytestmark = pytest.mark.usefixtures("restore_hydra")


def bf16(cell: dict) -> dict:
    """The same cell in bfloat16 (what a colleague's `dtype=bfloat16` renders: its anchor is in bfloat16 too)."""
    return {**cell, "model": {**cell["model"], "dtype": "bfloat16"}}


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def alice(workdir: Path) -> tuple[DemoRuns, Path]:
    """Alice's first generation at rung 4 under the shared out_root, her ledger's anchor frozen, scored."""
    runs = DemoRuns((workdir / "outputs").resolve())
    ledger = Ledger("tiny-demo", runs.root)
    freeze_rule(ledger, experiment_rule(compose_cfg("experiment=tiny-demo").experiment))
    ledger.append("anchor", cell_key=ANCHOR_KEY, cell=ANCHOR_CELL)
    sweep = runs.sweep()
    for steps, latency in ((8, 0.30), (4, 0.15), (12, 0.45)):
        runs.run(sweep, demo_cell(steps), dev_ids(4), perturb=shift(1), latency=latency)
    runs.anchor(dev_ids(4))
    db = workdir / "index.db"
    score([sweep], db, metrics=["ssim"])
    return runs, db


def bob_bf16(runs: DemoRuns, db: Path) -> Path:
    """Bob (another $HYPERGRID_STATE) renders the next rung of steps=4 in bfloat16 into the shared out_root and
    scores it into the shared index; his runs compare with a bfloat16 anchor."""
    sweep = runs.sweep()
    run = runs.run(sweep, bf16(demo_cell(4)), dev_ids(12), perturb=shift(2), latency=0.05,
                   anchor_cell=bf16(ANCHOR_CELL))
    runs.run(sweep, bf16(ANCHOR_CELL), dev_ids(12), is_anchor=True, latency=0.2, anchor_cell=bf16(ANCHOR_CELL))
    score([sweep], db, metrics=["ssim"])
    return run


@pytest.mark.slow
def test_a_colleagues_bfloat16_rung_is_refused_then_adopted_and_never_ranked(workdir: Path) -> None:
    """The named example: Alice's climb must not rank Bob's bfloat16 cell (more samples, at her steps=4 coords)
    against her anchor; it refuses, naming the difference, until the runs are adopted by a recorded entry; then they
    are listed, counted in her budget and never ranked."""
    runs, db = alice(workdir)
    bob = bob_bf16(runs, db)
    exp = load_experiment("tiny-demo")
    result = CliRunner().invoke(cli, ["climb", "tiny-demo", "--db", str(db)])
    assert result.exit_code == 1, result.output
    assert "compare with another anchor" in result.output and 'model.dtype: "float32" -> "bfloat16"' in result.output
    assert "--adopt" in result.output
    with Index.open(db) as index, pytest.raises(StrangerRuns):
        _observe(index, exp, db, False, print)

    before = budget_state(exp).spent_s
    adopted = CliRunner().invoke(cli, ["climb", "tiny-demo", "--db", str(db), "--adopt", "Bob's bf16 check"],
                                 catch_exceptions=False)
    assert adopted.exit_code == 0 and "adopted 2 run(s)" in adopted.output, adopted.output
    entry = exp.ledger.latest("adopt")
    assert entry["reason"] == "Bob's bf16 check" and str(bob.resolve()) in {r["path"] for r in entry["runs"]}

    result = CliRunner().invoke(cli, ["climb", "tiny-demo", "--db", str(db)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "adopted on" in result.output and "never ranked" in result.output
    with Index.open(db) as index:
        observed = _observe(index, exp, db, False, print)
    bob_key = cell_key_of(bf16(demo_cell(4)))
    assert bob_key not in observed.keys.values()  # not ranked: steps=4 is Alice's float32 cell
    assert observed.keys[("4", "none", "default")] == cell_key_of(demo_cell(4))
    assert observed.anchor_key == ANCHOR_KEY
    bob_spent = sum(s.device_s + (s.load_s or 0.0) for r in History.scan([bob.parent]).runs for s in r.samples)
    assert bob_spent > 0 and budget_state(exp, observed).spent_s == pytest.approx(before)  # counted all along
    alice_only = spent_gpu_seconds(exp.ledger, History([r for r in History.scan([runs.root]).runs
                                                         if r.path.parent != bob.parent]))
    assert before == pytest.approx(alice_only + bob_spent)


@pytest.mark.slow
def test_a_shared_index_brings_runs_outside_the_ledgers_out_roots_into_the_budget(workdir: Path) -> None:
    """Bob renders the experiment into his own out_root and scores it into the shared index: Alice's ledger never
    heard of that out_root, but her budget counts his samples (the index is evidence too); and once her climb has
    read them they are in her spend log, so the renderer's admission (which reads no index) counts them too."""
    runs, db = alice(workdir)
    theirs = DemoRuns((workdir / "bob-outputs").resolve())
    sweep = theirs.sweep()
    theirs.run(sweep, demo_cell(8, "fbcache"), dev_ids(4), perturb=shift(1), latency=0.5)
    score([sweep], db, metrics=["ssim"])
    exp = load_experiment("tiny-demo")
    with Index.open(db) as index:
        observed = _observe(index, exp, db, False, print)
    without = budget_state(exp).spent_s  # the out_roots alone, before the climb read the index
    assert budget_state(exp, observed).spent_s == pytest.approx(without + 4 * 0.5)
    assert budget_state(exp).spent_s == pytest.approx(without + 4 * 0.5)  # the same spend, from the log


def test_a_launch_is_refused_while_a_stranger_is_not_adopted(workdir: Path) -> None:
    """The laws' side: render's preflight reads the run folders and refuses a launch beside an unadopted stranger."""
    from render.laws import ExperimentGuard

    runs, db = alice(workdir)
    bob_bf16(runs, db)
    ledger = Ledger("tiny-demo", runs.root)
    history = History.scan(ledger.out_roots())
    with pytest.raises(ExperimentGuard, match='model.dtype: "float32" -> "bfloat16"'):
        check_evidence(ledger, history)
    found = strangers(ledger, [(str(r.path), r.cell_key, r.anchor_cell_key) for r in history.runs])
    assert len(found) == 2
    with pytest.raises(ExperimentGuard, match="reason"):
        adopt(ledger, found, " ")
    adopt(ledger, found, "Bob's bf16 check")
    check_evidence(ledger, history)  # adopted: recorded in the ledger, the launch goes on


@pytest.mark.slow
def test_a_colleague_with_another_state_folder_cannot_render_bfloat16_into_the_shared_out_root(
        tmp_path: Path, tiny_cache: Path) -> None:
    """The named example through the renderer: Bob's state folder has no copy of Alice's ledger, but the shared
    out_root's copy is one chain: his `dtype=bfloat16` changes the anchor and is refused before anything is written."""
    from tests.conftest import run_render

    args = ["experiment=tiny-demo", "model=tiny", "prompts.limit=1", "seed=0", "steps=2"]
    first = run_render(*args, cwd=tmp_path, timeout=300, env_extra={"HYPERGRID_STATE": str(tmp_path / "alice")})
    assert first.returncode == 0, first.stderr
    before = sorted(p for p in (tmp_path / "outputs").rglob("*") if p.is_file() and p.name != "digests.jsonl")
    second = run_render(*args, "steps=3", "dtype=bfloat16", cwd=tmp_path, timeout=300,
                        env_extra={"HYPERGRID_STATE": str(tmp_path / "bob")})
    assert second.returncode == 2 and "the anchor is frozen" in second.stderr, second.stderr
    assert '"dtype": "bfloat16"' in second.stderr
    after = sorted(p for p in (tmp_path / "outputs").rglob("*") if p.is_file() and p.name != "digests.jsonl")
    assert [p for p in after if p.suffix != ".lock" and "spend" not in p.name] == \
        [p for p in before if p.suffix != ".lock" and "spend" not in p.name]


def test_the_holdout_is_spent_per_content_whatever_the_experiment_is_called(tmp_path: Path) -> None:
    """A second experiment of another name on the same holdout texts finds the holdout spent by the first's final:
    the claim is refused, and the climb's evidence says whose final spent it."""
    _, holdout = option_prompts("holdout")
    first, second = Ledger("tiny-demo", tmp_path), Ledger("renamed-demo", tmp_path)
    for ledger in (first, second):
        register_holdout(ledger, "holdout")
    assert spent_elsewhere(second, holdout) is None  # nothing claimed yet
    claim_final(first, {"cells": []}, content_hash(holdout), holdout)
    found = spent_elsewhere(second, holdout)
    assert found is not None and "experiment tiny-demo's final" in found
    with pytest.raises(FinalAlreadyClaimed, match="the holdout is spent"):
        claim_final(second, {"cells": []}, content_hash(holdout), holdout)
    assert second.first("claim") is None
    assert json.dumps(spent_elsewhere(first, holdout)) == "null"  # its own claim is not another's
