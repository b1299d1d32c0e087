"""Every option of every config group composes and holds its schema; bad values fail at composition."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ValidationError

from render.cell import build_job
from render.compose.splits import load_prompts
from render.compose.schema import _sanitise_subdir
from tests.conftest import CONF_DIR, compose_cfg

GROUPS = ["model", "attention", "cache", "scheduler", "prompts", "compile", "quant", "offload"]


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (Path(CONF_DIR) / group).glob("*.yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_option_composes(group: str, option: str) -> None:
    cfg = compose_cfg("model=tiny", f"{group}={option}")
    assert cfg[group].name == option


def test_defaults_are_the_shapes_smoke_cell() -> None:
    cfg = compose_cfg("device=cpu")
    job = build_job(cfg)
    assert (cfg.model.name, cfg.attention.name, cfg.cache.name, cfg.prompts.name) == ("shapes", "native", "none", "smoke")
    assert job.cell.steps == cfg.model.steps and job.seeds == [0]


@pytest.mark.parametrize("overrides", [["steps=abc"], ["guidance=loud"], ["cache=fbcache", "cache.threshold=high"], ["model.steps=[1]"]])
def test_wrong_type_fails_at_composition(overrides: list[str]) -> None:
    with pytest.raises((ConfigCompositionException, ValidationError)):
        compose_cfg("model=tiny", *overrides)


@pytest.mark.parametrize("override", ["stepz=4", "cache=fbcache cache.treshold=0.1", "model.anchor.stepz=4", "attention.backend=flash"])
def test_unknown_key_fails_at_composition(override: str) -> None:
    with pytest.raises(ConfigCompositionException):
        compose_cfg("model=tiny", *override.split())


def test_unknown_option_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigCompositionException, match="Available options"):
        compose_cfg("model=tiny", "cache=turbo")


def test_cache_none_accepts_and_ignores_method_parameters() -> None:
    plain = build_job(compose_cfg("model=tiny", "device=cpu", "cache=none")).cell
    swept = build_job(compose_cfg("model=tiny", "device=cpu", "cache=none", "cache.threshold=0.1")).cell
    assert plain.key == swept.key


@pytest.mark.slow
def test_cell_key_ignores_seeds_paths_and_tags_but_not_pixels(tmp_path: Path) -> None:
    base = build_job(compose_cfg("model=tiny", "device=cpu")).cell.key
    assert build_job(compose_cfg("model=tiny", "device=cpu", "seed=[1,2]", "tag=x", "prompts=dev", out_root=tmp_path)).cell.key == base
    for override in ["steps=3", "cache=fbcache", "attention=math", "scheduler=euler", "guidance=1.0", "height=64"]:
        assert build_job(compose_cfg("model=tiny", "device=cpu", override)).cell.key != base, override


def test_anchor_is_the_models_reference_cell() -> None:
    job = build_job(compose_cfg("model=tiny", "device=cpu", "steps=4", "cache=fbcache"))
    assert job.anchor.steps == job.config["model"]["anchor"]["steps"]
    assert job.anchor.axes["cache"] == {"name": "none"} and not job.is_anchor
    anchor_like = build_job(compose_cfg("model=tiny", "device=cpu", *job.anchor_overrides))
    assert anchor_like.is_anchor and anchor_like.cell.key == job.anchor.key


def test_dev_and_holdout_are_disjoint_by_id_and_text() -> None:
    dev, holdout = load_prompts("dev.jsonl"), load_prompts("holdout.jsonl")
    assert not {p.id for p in dev} & {p.id for p in holdout}
    assert not {p.text.strip().lower() for p in dev} & {p.text.strip().lower() for p in holdout}


@pytest.mark.parametrize("dirname", ["tag=../../x", "tag=a/b/c", "tag=..", "prompts.file=/etc/passwd", "tag=" + "y" * 300])
def test_sweep_subdir_cannot_escape(dirname: str, tmp_path: Path) -> None:
    name = _sanitise_subdir(3, dirname)
    assert "/" not in name and ".." not in name and len(name) < 130
    assert (tmp_path / name).resolve().parent == tmp_path.resolve()


def test_sweep_subdir_names_are_readable() -> None:
    assert _sanitise_subdir(0, "cache=fbcache,steps=4") == "0_cache=fbcache,steps=4"
    assert json.dumps(_sanitise_subdir(1, ""))  # no overrides still names a folder
