"""One budget type, one check of the search's ranges: the renderer and assess refuse the same experiment values with
the same words (issue 31 item 1), and a choice field fails at composition naming the valid ones (item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException

from assess.experiment import ExperimentError, load_experiment
from render.laws.gpu_budget import Budget, BudgetError
from render.laws.rule import BadRule, rule_of
from tests.conftest import compose_cfg, run_render

BAD = [
    (["experiment.eta=1"], "experiment.eta=1: the halving factor must be >= 2"),
    (["experiment.budget.gpu_hours=0"], "experiment.budget.gpu_hours=0.0: must be > 0"),
    (["experiment.budget.gpu_hours=1", "experiment.budget.reserve_gpu_hours=1"],
     "experiment.budget.reserve_gpu_hours=1.0: must be >= 0 and below gpu_hours (1.0)"),
    (["experiment.quality.metric=psnr"], "experiment.quality.metric=psnr: parity is a band around the anchor's own"),
    (["experiment.quality.metric=fid"], "experiment.quality.metric=fid: valid metrics are ssim"),
    (["experiment.budget.price_per_gpu_hour=-2"], "experiment.budget.price_per_gpu_hour=-2.0: must be >= 0 (or null)"),
]


@pytest.mark.slow
@pytest.mark.parametrize("overrides, message", BAD)
def test_render_and_assess_refuse_the_same_values_with_the_same_words(tmp_path: Path, overrides: list[str],
                                                                      message: str) -> None:
    experiment = compose_cfg("experiment=tiny-demo", *overrides).experiment
    with pytest.raises(BadRule) as rendered:  # the renderer's route: the rule it freezes at the first launch
        rule_of(experiment, "dev", "holdout")
    with pytest.raises(ExperimentError) as assessed:  # assess's route: the experiment the climb loads
        load_experiment("tiny-demo", overrides, out_root=tmp_path)
    assert message in str(rendered.value) and message in str(assessed.value)


@pytest.mark.slow
def test_a_launch_with_a_bad_budget_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    result = run_render("-m", "experiment=tiny-demo", "experiment.budget.gpu_hours=1",
                        "experiment.budget.reserve_gpu_hours=3", cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "experiment.budget.reserve_gpu_hours=3.0: must be >= 0 and below gpu_hours (1.0)" in result.stderr
    assert not (tmp_path / "outputs").exists()


def test_the_objective_is_a_choice_refused_at_composition(tmp_path: Path) -> None:
    """A bad objective names the valid ones alike through the renderer (exit 2, nothing written) and assess."""
    with pytest.raises(ConfigCompositionException) as error:
        compose_cfg("experiment=tiny-demo", "experiment.objective=throughput")
    valid = "expected one of [latency, gpu_seconds]"
    assert "throughput" in str(error.value.__cause__) and valid in str(error.value.__cause__)
    result = run_render("-m", "experiment=tiny-demo", "experiment.objective=throughput", cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "experiment.objective=throughput" in result.stderr and valid in result.stderr
    assert not (tmp_path / "outputs").exists()
    with pytest.raises(ExperimentError, match=r"experiment.objective=throughput:? .*expected one of \[latency, gpu_seconds\]"):
        load_experiment("tiny-demo", ["experiment.objective=throughput"], out_root=tmp_path)


def test_the_schema_is_the_validated_type_and_the_ceiling_is_said_once() -> None:
    composed = compose_cfg("experiment=tiny-demo", "experiment.budget.gpu_hours=2",
                           "experiment.budget.reserve_gpu_hours=0.5").experiment.budget
    budget = Budget.of(composed)
    assert budget == Budget(2.0, 0.5) and budget.record() == {"gpu_hours": 2.0, "reserve_gpu_hours": 0.5,
                                                              "price_per_gpu_hour": None}
    assert (budget.navigable_s(final=False), budget.navigable_s(final=True)) == (1.5 * 3600, 2 * 3600)
    assert Budget.of(budget.record()) == budget  # a frozen rule's record reads back as the same budget
    with pytest.raises(BudgetError, match="gpu_hours='lots': expected a finite number"):
        Budget(gpu_hours="lots")  # type: ignore[arg-type]
