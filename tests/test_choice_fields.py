"""A choice field refuses a bad value before anything is written, naming it and the valid ones (issue 31 item 2):
a static choice is an Enum of the schema (refused at composition: exit 2 through `python -m render`), a choice
from a registry or a pattern is refused at preflight."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException

from render.cell import build_job
from render.run.preflight import PreflightError, preflight_config
from tests.conftest import compose_cfg, run_render

ENUMS = [("prompts.split", "smoke, dev, holdout, custom"), ("prompts.order", "stratified, file")]


@pytest.mark.parametrize("key, valid", ENUMS)
def test_a_static_choice_is_refused_at_composition(key: str, valid: str) -> None:
    with pytest.raises(ConfigCompositionException) as error:
        compose_cfg("model=tiny", f"{key}=bogus")
    assert f"Invalid value 'bogus', expected one of [{valid}]" in str(error.value.__cause__)
    assert f"full_key: {key}" in str(error.value.__cause__)


def test_a_split_is_recorded_as_its_value(tmp_path: Path) -> None:
    """The Enum members are their values: the job, its resolved config and run.json's JSON carry plain text."""
    job = build_job(compose_cfg("model=tiny", "prompts.split=custom", "prompts.order=file", out_root=tmp_path))
    assert type(job.split) is str and job.split == "custom"
    assert json.loads(json.dumps(job.config["prompts"]))["split"] == "custom"
    assert json.loads(json.dumps(job.config["prompts"]))["order"] == "file"


@pytest.mark.parametrize("override, message", [
    ("prompts.format=bogus", "prompts.format='bogus': valid formats are auto, coco, drawbench"),  # render.suites.READERS
    ("model.family=bogus", "model.family=bogus: no such model family; valid: flux, flux2"),  # render/models/families/
    ("device=bogus", "device='bogus': valid values are auto, cpu, cuda, cuda:N"),
    ("device=cuda:x", "device='cuda:x': valid values are auto, cpu, cuda, cuda:N"),  # not int('x') on a GPU host
])
def test_a_registry_or_pattern_choice_is_refused_at_preflight(tmp_path: Path, override: str, message: str) -> None:
    out = tmp_path / "outputs"
    with pytest.raises(PreflightError) as error:
        preflight_config(compose_cfg("model=tiny", override, out_root=out), [override])
    assert message in str(error.value)
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.slow
def test_a_bad_split_exits_2_before_anything_is_written(tmp_path: Path) -> None:
    result = run_render("model=tiny", "prompts.split=bogus", cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "prompts.split" in result.stderr and "expected one of [smoke, dev, holdout, custom]" in result.stderr
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("metric, why", [("bogus", ""), ("psnr", "parity is a band")])
def test_a_bad_quality_metric_is_refused_by_the_renderer(tmp_path: Path, metric: str, why: str) -> None:
    """Before the first launch freezes it into the rule (render.compose.metric_registry is the registry both sides read)."""
    overrides = ["experiment=tiny-demo", f"experiment.quality.metric={metric}"]
    with pytest.raises(PreflightError, match=f"experiment.quality.metric={metric}: {why}.*valid metrics are ssim"):
        preflight_config(compose_cfg("model=tiny", *overrides, out_root=tmp_path), overrides)
