"""Bad input the run directory must never see: refused at preflight with exit 2, a message naming the
value, and nothing written anywhere."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from render.cell import build_job
from render.run.preflight import PreflightError, preflight_all
from tests.conftest import compose_cfg, run_render


def refused(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    result = run_render(*args, cwd=tmp_path, env_extra=env)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "outputs").exists() and not (tmp_path.parent / "escaped").exists(), "something was written"
    return result.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_a_hostile_prompt_id_is_refused(tmp_path: Path) -> None:
    manifest = tmp_path / "hostile.jsonl"
    manifest.write_text(json.dumps({"id": "../../../../escaped/pwn", "text": "a red circle"}) + "\n")
    message = refused(tmp_path, "model=tiny", f"prompts.file={manifest}")
    assert "prompt id='../../../../escaped/pwn' cannot be used in a file name" in message


@pytest.mark.slow
@pytest.mark.parametrize("override", ["model.name=../../../../esc", "prompts.name=../x", "+experiment.name=../../x"])
def test_a_hostile_name_is_refused(tmp_path: Path, override: str) -> None:
    if override.startswith("+experiment"):
        override = "experiment=demo", "experiment.name=../../x"
    else:
        override = (override,)
    assert "cannot be used in a file name" in refused(tmp_path, "model=tiny", *override)


@pytest.mark.parametrize("args, says", [
    (("height=30",), "height=30: model tiny renders sizes that are multiples of 4; use 28 or 32"),
    (("+stpes=8",), "unknown key(s) stpes (did you mean steps?)"),
    (("+model.stpes=8",), "unknown key(s) model.stpes (did you mean model.steps?)"),
    (("cache.threshold=0.1",), "cache.threshold=0.1: not a parameter of this run's cache"),
    (("-m", "steps=2,3", "cache.threshold=0.1"), "not a parameter of the cache of any of the sweep's 2 cells"),
])
@pytest.mark.slow
def test_overrides_that_would_be_ignored_are_refused(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    assert says in refused(tmp_path, *args, "model=tiny")


@pytest.mark.slow
def test_a_sweep_that_gives_a_cache_parameter_to_some_cells_is_valid(tmp_path: Path) -> None:
    overrides = [["cache=none", "cache.threshold=0.1"], ["cache=fbcache", "cache.threshold=0.1"]]
    jobs = preflight_all([(o, compose_cfg("model=tiny", *o, out_root=tmp_path)) for o in overrides])
    assert [j.cell.axes["cache"] for j in jobs] == [{"name": "none"}, {"name": "fbcache", "threshold": 0.1}]
    with pytest.raises(PreflightError, match="cache.threshold=0.1: not a parameter of"):
        preflight_all([(["steps=2", "cache.threshold=0.1"], compose_cfg("model=tiny", "steps=2", "cache.threshold=0.1"))])


def test_an_out_root_that_cannot_be_created_is_named(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    message = refused(tmp_path, "model=tiny", f"out_root={tmp_path / 'a-file' / 'outputs'}")
    assert message == f"error: out_root={tmp_path / 'a-file' / 'outputs'}: cannot be created, {tmp_path / 'a-file'} is a file, not a folder; choose another out_root"


def test_a_slurm_launcher_without_a_controller_fails_before_the_sweep_is_recorded(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text("#!/bin/sh\necho 'Slurmctld(primary) at nowhere is DOWN'\nexit 1\n")
    (fake / "scontrol").chmod(0o755)
    env = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    message = refused(tmp_path, "-m", "steps=2,3", "hydra/launcher=slurm", "model=tiny", env=env)
    assert "hydra/launcher=slurm: no SLURM controller can be reached (`scontrol ping` says: Slurmctld(primary) at nowhere is DOWN)" in message


@pytest.mark.slow
def test_a_hub_model_neither_cached_nor_reachable_names_the_download_and_the_local_folder(tmp_path: Path) -> None:
    message = refused(tmp_path, "model=flux-dev", env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    assert "model.id=black-forest-labs/FLUX.1-dev: not in the local Hugging Face cache" in message
    assert "hf download black-forest-labs/FLUX.1-dev" in message and "model.id=/path/to/FLUX.1-dev" in message


def test_a_hub_model_in_the_local_cache_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = tmp_path / "hub" / "models--black-forest-labs--FLUX.1-dev" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "model_index.json").write_text("{}")
    refs = snapshot.parents[1] / "refs"
    refs.mkdir()
    (refs / "main").write_text("abc")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    from render.run.environment import check_hub_model

    check_hub_model(build_job(compose_cfg("model=flux-dev", "device=cpu")).cell.model)
