"""The laws read a prompts option as Hydra composes it (issue 31: Hydra the only config reader). An option that
extends another through its defaults list (`defaults: [dev, _self_]`) composes in Hydra; the laws' own reader
failed on it with `ConfigAttributeError: Missing key file`."""

from __future__ import annotations

from pathlib import Path

import pytest

from render.laws.holdout import HoldoutLocked, option_prompts
from tests.conftest import run_render

EXTENDS_DEV = "defaults: [dev, _self_]\nname: mydev\n"


@pytest.fixture
def user_conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "conf" / "prompts").mkdir(parents=True)
    (tmp_path / "conf" / "prompts" / "mydev.yaml").write_text(EXTENDS_DEV)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_an_option_that_extends_another_reads_as_hydra_composes_it(user_conf: Path) -> None:
    file, prompts = option_prompts("mydev")
    dev_file, dev = option_prompts("dev")
    assert file == dev_file == "dev.jsonl" and [p.text for p in prompts] == [p.text for p in dev]


def test_a_missing_option_names_the_folders_searched(user_conf: Path) -> None:
    with pytest.raises(HoldoutLocked, match=r"prompts option 'nope' not found in .*render/conf/prompts, .*conf/prompts"):
        option_prompts("nope")


@pytest.mark.slow
def test_an_experiment_launch_on_such_a_dev_option(user_conf: Path, tiny_cache: Path) -> None:
    """The route the issue names: a launch of an experiment whose dev split is that option (the laws read it inside
    the running Hydra app)."""
    result = run_render("-m", "experiment=tiny-demo", "experiment.dev=mydev", "prompts=mydev", "prompts.limit=2",
                        "steps=8", "cache=none", "scheduler=default", cwd=user_conf)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Missing key" not in result.stderr
