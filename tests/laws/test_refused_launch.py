"""A refusal leaves the experiment as it found it (issue 61, principle 4): a first launch refused for its budget
(its preflight measured cells by rendering, and that device time is rightly in the spend log) never makes the law
treat the experiment as one whose ledger was lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from render.laws import Ledger
from render.laws.spend import Purpose, record_spend, spend_lines
from render.run.preflight import PreflightError, preflight_budget
from tests.laws.test_admission import _job


def _refused(job) -> str:
    with pytest.raises(PreflightError) as refused:
        preflight_budget([job])
    return str(refused.value)


def test_a_first_launch_refused_for_its_budget_can_launch_once_the_budget_is_raised(tmp_path: Path) -> None:
    """Before: the refused first launch's measurement lines (no ledger yet) were read as evidence that a ledger had
    existed, and every later launch was refused for good ("no copy of its ledger is left ... its spend log")."""
    out = tmp_path / "outputs"
    small = _job(out, gpu_hours=0.001)  # 3.6 s: the 20 s estimate does not fit
    ledger = Ledger("tiny-demo", out)
    record_spend(ledger, 1.5, Purpose.MEASURE, cell_key=small.cell.key)  # what preflight's measurement writes
    assert "GPU-hours" in _refused(small)
    assert not ledger.entries() and len(spend_lines(ledger)) == 1
    preflight_budget([_job(out, gpu_hours=0.01)])  # re-budgeted: admitted
    assert ledger.entries("reservation"), "the admitted launch reserves its estimate"


def test_the_refused_launchs_device_time_stays_in_the_budget(tmp_path: Path) -> None:
    """Its measurement is still spent: 30 s measured + 20 s estimated does not fit 36 s."""
    out = tmp_path / "outputs"
    job = _job(out, gpu_hours=0.01)
    record_spend(Ledger("tiny-demo", out), 30.0, Purpose.MEASURE, cell_key=job.cell.key)
    assert "GPU-hours" in _refused(job)


def test_the_climb_reads_an_experiment_whose_first_launch_was_refused(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A route of our own: after the refusal, `assess climb` (load_experiment's evidence check), not only the
    renderer, takes the experiment as new: before, it refused it as a lost ledger."""
    from assess.experiment import load_experiment

    monkeypatch.chdir(tmp_path)
    record_spend(Ledger("tiny-demo", tmp_path / "outputs"), 1.5, Purpose.MEASURE)
    assert load_experiment("tiny-demo").name == "tiny-demo"


def test_a_spend_line_written_under_a_ledger_still_proves_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard is not weakened: a line that names a ledger head (written after the chain began) is evidence that
    the ledger existed, and its loss is refused as before."""
    from assess.experiment import ExperimentError, load_experiment
    from render.laws.spend import _STAMPS

    monkeypatch.chdir(tmp_path)
    ledger = Ledger("tiny-demo", tmp_path / "outputs")
    ledger.sync()
    ledger.append("holdout", texts=[])
    _STAMPS.clear()
    record_spend(ledger, 1.5, Purpose.SAMPLE)
    for path in ledger.copies():
        path.unlink()
    with pytest.raises(ExperimentError, match="no copy of its ledger is left.*its spend log"):
        load_experiment("tiny-demo")
