"""Honest restarts are explicit, recorded and labelled (issue 61, principle 4): an experiment whose final was claimed
on this machine, started over from a fresh state folder, was refused for good with no documented way back. Now
`assess climb <name> --restart "<why>"` starts it over in a new ledger whose first entry names what it supersedes,
records the reuse in the holdout lock, and every later verdict on that holdout says it is a reuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from render.laws import Ledger
from tests.laws.test_one_body import _claimed, composed, generation, invoke, launch, restore_hydra  # noqa: F401  (composed: the module's rules, once)

pytestmark = pytest.mark.usefixtures("restore_hydra")
# the routes through `assess climb` (several Hydra compositions each: 4-20 s on the shared machine) are slow; the
# law's own functions are tried in the default tier
WHY = "the project moved to a new machine image; starting the climb over"


def _alice_final(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Alice's experiment, its final claimed and completed, in her state folder and out_root (the machine's lock)."""
    from render.laws import complete_final

    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "alice"))
    ledger, _ = _claimed(tmp_path / "alice-out")
    claim = ledger.first("claim")
    complete_final(ledger, claim, {"experiment": "tiny-demo", "claimed_at": claim["at"], "parity": "parity"})


@pytest.mark.slow
def test_a_fresh_folder_after_a_final_starts_over_only_by_the_restart_command(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's route: from a fresh state folder the experiment is refused (its final's claim in the holdout lock
    proves a ledger); `--restart` records the restart, the climb then reads it, and its final's claim on the same
    holdout is let through, recorded in the lock as a reuse."""
    from assess.experiment import load_experiment
    from render.laws import claim_final, content_hash, option_prompts, register_holdout
    from render.laws.lock import lock_files, uses
    from render.laws.restart import reuse_note

    _alice_final(tmp_path, monkeypatch)
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "fresh"))
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "fresh-out")
    refused = invoke("climb", "tiny-demo", "--out-root", out, "--db", str(tmp_path / "index.db"))
    assert refused.exit_code != 0 and "holdout lock" in refused.output and "--restart" in refused.output, refused.output
    assert invoke("climb", "tiny-demo", "--out-root", out, "--restart", " ").exit_code != 0  # a reason is required
    restarted = invoke("climb", "tiny-demo", "--out-root", out, "--restart", WHY)
    assert restarted.exit_code == 0, restarted.output
    assert "restarted" in restarted.output and "a reuse of the holdout" in restarted.output
    ledger = Ledger("tiny-demo", Path(out))
    (entry,) = ledger.entries("restart")
    assert entry["reason"] == WHY and entry["supersedes"] and entry["holdout_uses"][0]["kind"] in ("claim", "final")
    load_experiment("tiny-demo", out_root=out)  # the climb reads it now
    # its final: the lock no longer refuses this experiment on the texts its earlier ledger used ...
    launch(Path(out))
    register_holdout(ledger, "holdout")
    _, holdout = option_prompts("holdout")
    claim_final(ledger, {"cells": []}, content_hash(holdout), holdout)
    kinds = [u["kind"] for u in uses(lock_files(ledger)) if u.get("origin") == ledger.reconciled().chain[0]["hash"]]
    assert kinds == ["restart", "claim"], kinds
    # ... and every verdict on it says it is a reuse
    note = reuse_note(ledger)
    assert note is not None and WHY in note and "completed its final" in note or "claimed its final" in str(note)


def test_the_finals_verdict_says_it_is_on_a_reused_holdout() -> None:
    """What `assess climb --final` prints (and the report shows) for a final with a reuse."""
    from assess.climb.run_final import FinalResult, format_final

    result = FinalResult("tiny-demo", "2026-12-07", {}, "steps=4", "ssim", 0.01, 0.05, [], "parity",
                         reuse="a reuse of the holdout: ...")
    text = format_final(result)
    assert "on a reused holdout" in text and "holdout reuse: a reuse of the holdout" in text
    assert FinalResult.from_dict(result.as_dict()).reuse == result.reuse


@pytest.mark.slow
def test_an_experiment_whose_ledger_is_here_is_never_restarted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A route of our own: `--restart` on a live experiment (its ledger here) would throw its rule, budget and final
    away: refused, nothing recorded."""
    monkeypatch.chdir(tmp_path)
    ledger = launch(tmp_path / "outputs")
    before = ledger.entries()
    refused = invoke("climb", "tiny-demo", "--restart", WHY)
    assert refused.exit_code != 0 and "its ledger is here" in refused.output and "new experiment.name" in refused.output
    assert ledger.entries() == before


@pytest.mark.slow
def test_a_restart_over_a_lost_ledger_keeps_the_earlier_evidence_apart(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A route of our own: every ledger copy lost mid-climb (its generation record left): refused as before, until a
    recorded restart, after which the earlier generation is superseded (not a refusal) and no final was used, so no
    verdict is labelled a reuse."""
    from render.laws.restart import reuse_note, superseded

    monkeypatch.chdir(tmp_path)
    ledger = launch(tmp_path / "outputs")
    generation(ledger, 0.002)
    head = ledger.reconciled().chain[-1]["hash"]
    for path in ledger.copies():
        path.unlink()
    assert "no copy of its ledger is left" in invoke("climb", "tiny-demo").output
    assert invoke("climb", "tiny-demo", "--restart", WHY).exit_code == 0
    fresh = Ledger("tiny-demo", tmp_path / "outputs")
    assert head in superseded(fresh) and reuse_note(fresh) is None


@pytest.mark.slow
def test_another_experiment_is_still_refused_the_reused_holdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A route of our own: the restart's lock line names the texts too, so a third experiment of another name cannot
    claim them (a restart is this experiment's, not a release of the holdout)."""
    from render.laws import FinalAlreadyClaimed, claim_final, content_hash, option_prompts, register_holdout

    _alice_final(tmp_path, monkeypatch)
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "fresh"))
    monkeypatch.chdir(tmp_path)
    assert invoke("climb", "tiny-demo", "--out-root", str(tmp_path / "fresh-out"), "--restart", WHY).exit_code == 0
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "carol"))
    carol = Ledger("renamed-demo", tmp_path / "carol-out")
    register_holdout(carol, "holdout")
    _, holdout = option_prompts("holdout")
    with pytest.raises(FinalAlreadyClaimed, match="experiment tiny-demo"):
        claim_final(carol, {"cells": []}, content_hash(holdout), holdout)


def test_the_restart_law_supersedes_the_earlier_final_and_lets_its_claim_through(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The default tier's version of the issue's route, through render.laws.restart directly."""
    from render.laws import FinalAlreadyClaimed, claim_final, content_hash, option_prompts, register_holdout
    from render.laws.anchor import ExperimentGuard
    from render.laws.evidence import check_ledger_held, traces
    from render.laws.restart import restart, reuse_note

    _alice_final(tmp_path, monkeypatch)
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "fresh"))
    fresh = Ledger("tiny-demo", tmp_path / "fresh-out")
    with pytest.raises(ExperimentGuard, match="no copy of its ledger is left.*holdout lock.*--restart"):
        check_ledger_held(fresh, traces(fresh))
    with pytest.raises(ExperimentGuard, match="needs its reason"):
        restart(fresh, "  ", traces(fresh))
    restart(fresh, WHY, traces(fresh))
    check_ledger_held(fresh, traces(fresh))  # the lock's lines of the earlier ledger are superseded, by the entry
    with pytest.raises(ExperimentGuard, match="its ledger is here"):
        restart(fresh, WHY, traces(fresh))
    fresh = launch(tmp_path / "fresh-out")
    register_holdout(fresh, "holdout")
    _, holdout = option_prompts("holdout")
    claim_final(fresh, {"cells": []}, content_hash(holdout), holdout)
    assert "a reuse of the holdout" in str(reuse_note(fresh)) and WHY in str(reuse_note(fresh))
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "bob"))  # without a restart of his own: still refused
    bob = launch(tmp_path / "bob-out")
    register_holdout(bob, "holdout")
    with pytest.raises(FinalAlreadyClaimed):
        claim_final(bob, {"cells": []}, content_hash(holdout), holdout)
