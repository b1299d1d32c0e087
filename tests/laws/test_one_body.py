"""One experiment, one body of evidence (issue 44): the laws hold across state folders, output roots and lost
ledgers. Each test takes one route that broke the law before, and sees it held or refused with its reason.

Evidence is built through the project's own contract modules (render.laws, render.rundir) and the climb's plain
functions, so these tests stay in the default tier."""

from __future__ import annotations

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


def launch(out_root: Path, *overrides: str) -> Ledger:
    """What an experiment's first launch records (render.laws.record_launch): the copies, the frozen rule."""
    ledger = Ledger("tiny-demo", out_root)
    ledger.sync()
    freeze_rule(ledger, experiment_rule(compose_cfg("experiment=tiny-demo", *overrides).experiment))
    return ledger


# -- route 1: the ledger's copies deleted, then the band changed -------------------------------------


def test_a_lost_ledger_is_refused_not_restarted_and_the_band_does_not_change(workdir: Path) -> None:
    """Both ledger copies deleted, then the band changed from 0.5 to 0.001: before, the next generation took the
    new band with no amendment recorded. Now the generation records (which name the ledger head they were decided
    under and the band) are evidence that a ledger existed: the climb refuses, saying how to restore it."""
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
    ledger = launch(workdir / "outputs", "experiment.quality.band=0.5")
    assert invoke("climb", "tiny-demo", "--db", str(workdir / "index.db"), "--set",
                  "experiment.quality.band=0.5").exit_code == 0
    for path in ledger.copies():
        path.unlink()
    amended = invoke("climb", "tiny-demo", "--set", "experiment.quality.band=0.001", "--amend", "tighter")
    assert amended.exit_code != 0 and "no copy of its ledger is left" in amended.output, amended.output
    assert not any(path.exists() for path in ledger.copies())


def test_a_kept_copy_restores_the_ledger_and_the_climb_goes_on(workdir: Path) -> None:
    """The refusal's remedy works: a copy put back (here the one the message names) and the climb goes on."""
    db = workdir / "index.db"
    ledger = launch(workdir / "outputs")
    assert invoke("climb", "tiny-demo", "--db", str(db)).exit_code == 0
    backup = ledger.state_copy.read_bytes()
    for path in ledger.copies():
        path.unlink()
    refused = invoke("climb", "tiny-demo", "--db", str(db))
    assert refused.exit_code != 0 and str(ledger.state_copy) in refused.output, refused.output
    ledger.state_copy.write_bytes(backup)
    again = invoke("climb", "tiny-demo", "--db", str(db))
    assert again.exit_code == 0, again.output


def test_a_fresh_ledger_under_the_old_evidence_is_refused(workdir: Path) -> None:
    """The copies deleted and a new rule frozen in their place (a launch of a version before this one, or by
    hand): the generation records name a head this chain never had, and another band. Refused, not climbed."""
    db = workdir / "index.db"
    ledger = launch(workdir / "outputs", "experiment.quality.band=0.5")
    assert invoke("climb", "tiny-demo", "--db", str(db), "--set", "experiment.quality.band=0.5").exit_code == 0
    for path in ledger.copies():
        path.unlink()
    launch(workdir / "outputs", "experiment.quality.band=0.001")
    refused = invoke("climb", "tiny-demo", "--db", str(db), "--set", "experiment.quality.band=0.001")
    assert refused.exit_code != 0
    assert "a ledger head this ledger never had" in refused.output, refused.output


def test_a_changed_band_with_no_ledger_and_old_generations_is_refused(workdir: Path) -> None:
    """Generation records written before they named a ledger head (an older version) still say the band they were
    decided under: with no ledger, another band is refused, naming both values; the same band goes on."""
    db = workdir / "index.db"
    assert invoke("climb", "tiny-demo", "--db", str(db), "--set", "experiment.quality.band=0.5").exit_code == 0
    path = workdir / "outputs/experiments/tiny-demo/generations/g0001.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({k: v for k, v in record.items() if k != "ledger"}))
    refused = invoke("climb", "tiny-demo", "--db", str(db), "--set", "experiment.quality.band=0.001")
    assert refused.exit_code != 0 and "quality.band: 0.5 -> 0.001" in refused.output, refused.output
    assert invoke("climb", "tiny-demo", "--db", str(db), "--set", "experiment.quality.band=0.5").exit_code == 0


def test_an_honest_amendment_still_changes_the_band(workdir: Path) -> None:
    """Nothing honest is refused: with the ledger in place, an amendment changes the band, and the climb goes on
    under it with the old generations' band among the ledger's versions."""
    db = workdir / "index.db"
    launch(workdir / "outputs", "experiment.quality.band=0.5")
    assert invoke("climb", "tiny-demo", "--db", str(db), "--set", "experiment.quality.band=0.5").exit_code == 0
    amended = invoke("climb", "tiny-demo", "--set", "experiment.quality.band=0.001", "--amend", "tighter")
    assert amended.exit_code == 0 and "rule amended" in amended.output, amended.output
    again = invoke("climb", "tiny-demo", "--db", str(db), "--set", "experiment.quality.band=0.001")
    assert again.exit_code == 0, again.output
