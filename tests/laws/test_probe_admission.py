"""Every device call is admitted (issue 61, principle 3), preflight's probes too: a launch of a cell without history
measures it by rendering (its model load, a cache's calibration render, a warm-up and a timed render) before the
sweep's own admission. That device time is rightly in the spend log, but it ran whatever the budget said: an
experiment with nothing left still loaded and rendered. Now each step is admitted before it runs
(render.laws.admission.admit_step), under the same ceiling as a sweep (the reserve only for the final's own work)."""

from __future__ import annotations

from pathlib import Path

import pytest

from render.cell import build_job
from render.laws import Ledger
from render.laws.admission import BudgetExceeded, admit_step, History
from render.laws.spend import Purpose, logged_seconds, record_spend, spend_lines
from render.run.preflight import PreflightError, measure_one_sample, preflight_budget
from tests.conftest import compose_cfg

BUDGET_S = 36.0  # experiment.budget.gpu_hours=0.01, no reserve


def _job(out: Path, *extra: str):
    """A tiny-demo cell and its anchor with no history: its launch must measure them."""
    return build_job(compose_cfg("experiment=tiny-demo", "prompts.limit=1", "seed=0", "steps=2", "device=cpu",
                                 "experiment.budget.gpu_hours=0.01", "experiment.budget.reserve_gpu_hours=0", *extra,
                                 out_root=out))


def _purposes(ledger: Ledger) -> list[str]:
    return [line["what"] for line in spend_lines(ledger)]


def test_an_experiment_with_no_budget_left_measures_nothing(tiny_cache: Path, tmp_path: Path) -> None:
    """Before: its cells were loaded and rendered (the spend log grew past the budget), then the launch refused."""
    out = tmp_path / "outputs"
    job = _job(out)
    ledger = Ledger("tiny-demo", out)
    record_spend(ledger, BUDGET_S, Purpose.SAMPLE)  # everything spent (a launch of the past)
    with pytest.raises(PreflightError, match="preflight's measurement.*its model load.*GPU-hours"):
        preflight_budget([job])
    assert _purposes(ledger) == [Purpose.SAMPLE], "a refused probe loads and renders nothing"


def test_a_probe_stops_between_its_steps_when_the_next_would_pass_the_ceiling(tiny_cache: Path,
                                                                               tmp_path: Path) -> None:
    """Each step is admitted with what the previous render took as its estimate: a measurement that used what was
    left stops before its next render (a route of our own: the steps after the first)."""
    out = tmp_path / "outputs"
    job = _job(out)
    ledger = Ledger("tiny-demo", out)
    history = History.scan([out])
    steps: list[tuple[str, float]] = []

    def admit(what: str, next_s: float) -> None:
        steps.append((what, next_s))
        if len(steps) == 3:  # before the timed render: the spend so far leaves less than the warm-up took
            record_spend(ledger, BUDGET_S - logged_seconds(spend_lines(ledger)) - next_s / 2,
                         Purpose.SAMPLE)
        admit_step(ledger, job.experiment.budget, False, history, what, next_s)

    with pytest.raises(BudgetExceeded, match="its timed render"):
        measure_one_sample(job, admit)
    assert [what.split(": ")[1] for what, _ in steps] == ["its model load", "its warm-up render", "its timed render"]
    assert steps[0][1] == steps[1][1] == 0.0 and steps[2][1] > 0, "the timed render is estimated by the warm-up"
    assert _purposes(ledger).count(Purpose.MEASURE) == 1, "the timed render never ran"


def test_the_finals_probe_may_spend_the_reserve(tiny_cache: Path, tmp_path: Path) -> None:
    """The reserve is the final's: a navigating probe is refused where the final's is admitted."""
    out = tmp_path / "outputs"
    job = _job(out, "experiment.budget.reserve_gpu_hours=0.005")
    ledger = Ledger("tiny-demo", out)
    record_spend(ledger, BUDGET_S / 2 + 1, Purpose.SAMPLE)  # past the navigable 18 s, within the budget's 36 s
    with pytest.raises(BudgetExceeded):
        admit_step(ledger, job.experiment.budget, False, History.scan([out]), "a probe", 0.0)
    admit_step(ledger, job.experiment.budget, True, History.scan([out]), "a probe", 1.0)


def test_the_reference_workload_of_an_experiments_cell_is_spent(tiny_cache: Path, tmp_path: Path) -> None:
    """The reference workload (render.run.measure: matrix products timed at a cell's start and end) is device work
    of the sweep: before, it was in no spend line (a route of our own: device work inside an admitted sweep)."""
    from render.app import PIPELINES
    from render.rundir import SampleStore
    from render.run.runner import run_job

    out = tmp_path / "outputs"
    job = _job(out, "render_anchor=false")
    (result,) = run_job(job, out / "run", store=SampleStore(out), pipelines=PIPELINES, overrides=[])
    assert result.status == "done", result.message
    reference = [line for line in spend_lines(Ledger("tiny-demo", out)) if line["what"] == Purpose.REFERENCE]
    assert len(reference) == 2 and sum(line["s"] for line in reference) > 0, "its start and its end"


def test_a_cache_that_calibrates_has_its_calibration_render_in_the_sweeps_estimate(tmp_path: Path) -> None:
    """MagCache without ratios renders the cell once before its samples (a route of our own: device work inside the
    sweep that its admission did not count): one more sample's time in the estimate, none with given ratios."""
    from render.laws.admission import estimate_jobs
    from tests.laws.test_admission import PER_SAMPLE_S, _history

    out = tmp_path / "outputs"
    estimates = {}
    for ratios in ([], ["cache.mag_ratios=[1.0,1.0]"]):
        job = build_job(compose_cfg("experiment=tiny-demo", "prompts.limit=1", "seed=0", "steps=2", "cache=magcache",
                                    *ratios, out_root=out))
        _history(out, job.cell.key, job.cell.key)
        estimates[bool(ratios)] = estimate_jobs([job], {job.cell.key: 1}, History.scan([out])).seconds
    assert estimates == {False: pytest.approx(2 * PER_SAMPLE_S), True: pytest.approx(PER_SAMPLE_S)}
