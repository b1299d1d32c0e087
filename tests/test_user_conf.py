"""The working directory's conf/ is searched after the package's: the shipped examples compose, a
user's own model, experiment and launcher profile need no flags, and `assess climb` finds them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from render.compose.confpath import PACKAGE_CONF, conf_dirs, group_options
from render.run.preflight import PreflightError, preflight_config
from tests.conftest import compose_cfg

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def in_repo(monkeypatch) -> Path:
    monkeypatch.chdir(ROOT)
    return ROOT


def test_the_user_conf_is_searched_after_the_package(in_repo: Path) -> None:
    assert conf_dirs() == [PACKAGE_CONF, in_repo / "conf"]
    assert "shapes-caches" in group_options("experiment") and "demo" in group_options("experiment")


def test_no_conf_folder_no_extra_path(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert conf_dirs() == [PACKAGE_CONF]
    with pytest.raises(Exception, match="my-flux"):
        compose_cfg("model=my-flux")


@pytest.mark.slow
def test_the_example_model_composes_and_preflight_names_its_folder(in_repo: Path) -> None:
    cfg = compose_cfg("model=my-flux", "device=cpu")
    assert (cfg.model.name, cfg.model.pipeline, cfg.model.id) == ("my-flux", "FluxPipeline", "~/models/FLUX.1-dev")
    assert cfg.model.anchor.steps == 50 and cfg.model.guidance == 3.5  # the rest comes from flux-dev
    with pytest.raises(PreflightError, match="model.id=~/models/FLUX.1-dev: no diffusers pipeline folder there"):
        preflight_config(cfg)


def test_the_example_launcher_profile_composes(in_repo: Path) -> None:
    with initialize_config_dir(config_dir=str(PACKAGE_CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["hydra/launcher=mycluster"], return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_ == "hydra_plugins.hypergrid.slurm.SlurmLauncher"
    assert (launcher.partition, launcher.account, launcher.gpus, launcher.timeout_min) == ("gpu", "my-lab", 8, 120)
    assert launcher.signal_delay_s == 120 and list(launcher.setup)[0] == "module load cuda/12.4"


def test_assess_climb_finds_the_example_experiment(in_repo: Path) -> None:
    from assess.experiment import load_experiment

    exp = load_experiment("shapes-caches")
    assert exp.name == "shapes-caches" and exp.quality.metric == "shapes_fit" and exp.quality.band == 0.01
    assert exp.axes["cache"] == ("none", "fbcache", "pab", "taylorseer")


@pytest.mark.slow
def test_a_render_run_outside_the_repo_finds_a_user_model(tmp_path: Path, tiny_cache: Path) -> None:
    from tests.conftest import run_render

    (tmp_path / "conf" / "model").mkdir(parents=True)
    (tmp_path / "conf" / "model" / "my-tiny.yaml").write_text("defaults: [tiny, _self_]\nname: my-tiny\n")
    result = run_render("model=my-tiny", "prompts.limit=1", "steps=2", "render_anchor=false", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "my-tiny" in result.stdout
