"""The lock and the ledger reconcile (issue 61, principle 2): a ledger behind what a lock records of it refuses to act
and names the copy that is ahead; the machine lock's place does not follow $HYPERGRID_CACHE; a holdout previewed in
any root a render on this machine launched into is contamination, whenever it was rendered."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from render.laws import FinalAlreadyClaimed, Ledger, claim_final, complete_final, content_hash, option_prompts
from render.laws.anchor import ExperimentGuard
from tests.laws.test_one_body import _claimed, composed, launch, restore_hydra  # noqa: F401  (composed: rules, once)

pytestmark = pytest.mark.usefixtures("restore_hydra")


def _complete(ledger: Ledger) -> None:
    claim = ledger.first("claim")
    complete_final(ledger, claim, {"experiment": ledger.name, "claimed_at": claim["at"], "parity": "parity"})


def test_a_working_copy_taken_before_the_final_cannot_claim_a_second_one(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's route (a): the project copied before the final (its out_root and ledger copy), the original's
    final completed and archived, the copy run from a fresh state folder. Before: the lock took any line of the same
    origin for "my own claim" and let a second claim through. Now the copy is behind the lock: refused, naming the
    state folder whose ledger is ahead; the climb refuses it too."""
    from render.laws import register_holdout
    from render.laws.evidence import check_ledger_held, traces

    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "alice"))
    alice = launch(tmp_path / "project" / "outputs")
    register_holdout(alice, "holdout")
    shutil.copytree(tmp_path / "project", tmp_path / "copy")  # the working copy, before the final
    _, holdout = option_prompts("holdout")
    claim_final(alice, {"cells": []}, content_hash(holdout), holdout)
    _complete(alice)
    (tmp_path / "project").rename(tmp_path / "archived")
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "fresh"))
    copy = Ledger("tiny-demo", tmp_path / "copy" / "outputs")
    assert copy.entries("holdout") and not copy.entries("claim")  # the copy's chain: before the final
    with pytest.raises(FinalAlreadyClaimed, match="is behind the holdout lock") as refused:
        claim_final(copy, {"cells": []}, content_hash(holdout), holdout)
    assert str(tmp_path / "alice") in str(refused.value) and "the claim of its final" in str(refused.value)
    assert not copy.entries("claim")
    with pytest.raises(ExperimentGuard, match="is behind the holdout lock"):
        check_ledger_held(copy, traces(copy))


def test_a_claimed_final_is_still_resumed_by_its_own_ledger(tmp_path: Path) -> None:
    """The check is not in the way of the ledger that holds the claim: a resumed final is not refused."""
    from render.laws.lock import behind, locked_by_others
    from render.rundir import holdout_identity

    ledger, holdout = _claimed(tmp_path / "outputs")
    assert behind(ledger) is None
    assert locked_by_others(ledger, [holdout_identity(p.text) for p in holdout]) is None
    _complete(ledger)
    assert behind(ledger) is None


def test_the_machine_lock_does_not_follow_a_moved_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's route (b): $HYPERGRID_CACHE moved (for disk space) and the project copied under a new name, same
    machine and user. Before: the lock lived beside the cache, so the second final on the same holdout texts saw
    none of the first. Now the machine lock has a fixed place in the user's home."""
    from render.laws import register_holdout
    from render.laws.lock import machine_lock

    monkeypatch.delenv("HYPERGRID_LOCK")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HYPERGRID_CACHE", str(tmp_path / "cache-on-home"))
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "alice"))
    first, holdout = _claimed(tmp_path / "outputs")
    _complete(first)
    monkeypatch.setenv("HYPERGRID_CACHE", str(tmp_path / "cache-on-scratch"))
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "copy-state"))
    second = Ledger("renamed-demo", tmp_path / "copy" / "outputs")
    register_holdout(second, "holdout")
    with pytest.raises(FinalAlreadyClaimed, match="experiment tiny-demo claimed its final"):
        claim_final(second, {"cells": []}, content_hash(holdout), holdout)
    assert machine_lock() == tmp_path / "home" / ".cache" / "hypergrid" / "holdout-lock.jsonl"


def test_a_lock_left_beside_an_older_versions_cache_is_still_read(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A route of our own: a final recorded by an older version beside $HYPERGRID_CACHE (not in the home lock) is
    still seen while the variable names that cache."""
    from render.laws import register_holdout
    from render.laws.lock import cache_lock, lock_files

    monkeypatch.setenv("HYPERGRID_LOCK", str(tmp_path / "cache" / "holdout-lock.jsonl"))  # the old place, as written
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "alice"))
    _, holdout = _claimed(tmp_path / "outputs")
    monkeypatch.delenv("HYPERGRID_LOCK")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HYPERGRID_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "bob"))
    bob = Ledger("renamed-demo", tmp_path / "bob-out")
    assert cache_lock() in lock_files(bob)
    register_holdout(bob, "holdout")
    with pytest.raises(FinalAlreadyClaimed, match="experiment tiny-demo claimed its final"):
        claim_final(bob, {"cells": []}, content_hash(holdout), holdout)


def test_a_holdout_previewed_in_another_root_before_the_first_launch_is_contamination(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's route (c): holdout texts rendered into another output root before the experiment's first launch
    (its ledger never knew that root, the index never scored it). Every launch records its root among the machine's
    known roots (render.laws.record_launch), and the final's contamination check reads them all."""
    from assess.climb.run_final import holdout_evidence
    from assess.experiment import load_experiment
    from assess.index.database import Index
    from types import SimpleNamespace

    from render.laws import record_launch
    from tests.assess.climb_fixtures import DemoRuns, demo_cell, holdout_ids

    monkeypatch.chdir(tmp_path)
    scratch = (tmp_path / "scratch").resolve()
    record_launch([SimpleNamespace(out_root=scratch, experiment=None)])  # what the preview's launch records (a job)
    preview = DemoRuns(scratch)
    found_run = preview.run(preview.sweep(), demo_cell(4), holdout_ids(2), split="holdout")
    launch(tmp_path / "outputs")
    with Index.open(tmp_path / "index.db") as index:
        found = holdout_evidence(load_experiment("tiny-demo"), index)
    assert found is not None and "contaminated" in found and str(found_run) in found, found
