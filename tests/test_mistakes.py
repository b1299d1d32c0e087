"""A mistyped option of a group or a mistyped key is answered in one line naming the real choice (render.compose.mistakes):
from a single run, a sweep's cell and `assess climb --set` alike, the user's own options included; and the schemas
are never among a group's options."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import MissingConfigException

from render.compose.confpath import PACKAGE_CONF
from render.compose.help import group_options, groups
from render.compose.mistakes import answered, explain
from tests.conftest import compose_cfg, run_render

CACHES = "fastercache, fbcache, magcache, none, pab, seacache, taylorseer, textkv"
ATTENTIONS = "cudnn, efficient, flash, flash3, flex, math, native, sage, sdpa-flash, xformers"
TOP_KEYS = ("model, prompts, warmup, steps, seed, height, width, guidance, batch, dtype, device, out_root, tag, render_anchor, "
            "experiment, metrics, timing, parallel, attention, scheduler, quant, vae_tiling, vae_slicing, fuse_qkv, "
            "channels_last, offload, cache, compile")

ANSWERS = {
    "cache=fbcahce": f"cache=fbcahce: no such cache option (did you mean cache=fbcache?); the cache options are {CACHES}",
    "attention=flsh": f"attention=flsh: no such attention option (did you mean attention=flash?); the attention options "
                      f"are {ATTENTIONS}",
    "step=4": f"step=4: the config has no key step (did you mean steps=4?); its keys are {TOP_KEYS}",
    "cahce=fbcache": f"cahce=fbcache: the config has no key cahce (did you mean cache=fbcache?); its keys are {TOP_KEYS}",
    "cache=fbcache cache.treshold=0.1": "cache.treshold=0.1: cache has no key treshold (did you mean "
                                        "cache.threshold=0.1?); its keys are name, threshold",
    "model.anchr.steps=3": "model.anchr.steps=3: model has no key anchr (did you mean model.anchor.steps=3?); its keys "
                           "are name, id, revision, pipeline, family, dtype, steps, guidance, height, width, "
                           "max_sequence_length, size_multiple, num_frames, fps, anchor, parity",
    "steps=abc": "steps=abc: Value 'abc' of type 'str' could not be converted to Integer",
}


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch) -> Path:
    """Run from a folder with no conf/ of its own (unless a test writes one): the shipped options only."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def composition_error(*overrides: str) -> BaseException:
    with pytest.raises(Exception) as error:
        compose_cfg(*overrides)
    return error.value


@pytest.mark.parametrize("overrides", list(ANSWERS))
def test_a_mistyped_option_or_key_gets_one_line_naming_the_real_one(overrides: str, elsewhere: Path) -> None:
    assert explain(composition_error(*overrides.split())) == ANSWERS[overrides]


def test_a_mistyped_model_names_the_model_and_every_model_option(elsewhere: Path) -> None:
    answer = explain(composition_error("model=tinny"))
    assert answer == f"model=tinny: no such model option (did you mean model=tiny?); the model options are " \
                     f"{', '.join(group_options('model'))}"


@pytest.mark.parametrize("group", list(groups()))
def test_a_groups_options_are_its_real_choices_and_never_a_schema(group: str, elsewhere: Path) -> None:
    error = composition_error(f"{group}=no-such-option")
    assert isinstance(error, MissingConfigException)
    assert sorted(error.options) == group_options(group)  # what Hydra searched: the option files, the launchers
    assert not [o for o in error.options if "schema" in o]
    assert explain(error).endswith(f"the {group} options are {', '.join(group_options(group))}")


def test_a_users_own_options_are_suggested(elsewhere: Path) -> None:
    (elsewhere / "conf" / "model").mkdir(parents=True)
    (elsewhere / "conf" / "model" / "my-tiny.yaml").write_text("defaults: [tiny, _self_]\nname: my-tiny\n")
    answer = explain(composition_error("model=my-tinyy"))
    assert answer is not None and answer.startswith("model=my-tinyy: no such model option (did you mean model=my-tiny?)")
    assert "my-tiny" in answer.split("the model options are ")[1].split(", ")


def test_a_users_file_naming_a_schemas_old_name_is_told_the_new_one(elsewhere: Path) -> None:
    (elsewhere / "conf" / "prompts").mkdir(parents=True)
    (elsewhere / "conf" / "prompts" / "mine.yaml").write_text(
        "defaults: [prompts_schema, _self_]\nname: mine\nsplit: dev\nfile: mine.jsonl\n")
    assert explain(composition_error("prompts=mine")) == (
        "prompts/mine: its defaults name prompts_schema, the old name of a schema; the schemas are in their own group "
        "now: write /schema/prompts@_here_ (a cache method's: /schema/cache/<method>@_here_)")


def test_an_error_that_is_no_such_mistake_keeps_hydras_message(elsewhere: Path) -> None:
    assert explain(composition_error("~no_such_key")) is None


@pytest.fixture
def cli(elsewhere: Path, monkeypatch, capsys):
    """`python -m render <args>` in this process (its Hydra app, under `answered()`): (exit status, stderr). Its config
    folder given as a path: imported, not run as __main__, the app would look for a package `render.conf`."""
    from render.__main__ import _task

    def run(*args: str) -> tuple[object, str]:
        monkeypatch.setattr(sys, "argv", ["render", f"--config-path={PACKAGE_CONF}", *args,
                                          f"out_root={elsewhere / 'out'}"])
        try:
            with answered(), pytest.raises(SystemExit) as exit:
                _task()
        finally:
            GlobalHydra.instance().clear()
        return exit.value.code, capsys.readouterr().err
    return run


@pytest.mark.parametrize("args, overrides", [
    (["cache=fbcahce"], "cache=fbcahce"),
    (["step=4"], "step=4"),
    (["-m", "cache=none,fbcahce"], "cache=fbcahce"),  # a sweep: its cell's own override is named
    (["-m", "attention=native,flsh"], "attention=flsh"),
])
def test_the_cli_prints_the_line_alone_and_exits_2(cli, args: list[str], overrides: str, elsewhere: Path) -> None:
    code, err = cli(*args)
    assert (code, err) == (2, f"error: {ANSWERS[overrides]}\n")  # no option list of Hydra's, no search path
    assert not (elsewhere / "out").exists()


def test_hydra_full_error_keeps_hydras_own_error(cli, monkeypatch) -> None:
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    with pytest.raises(MissingConfigException, match="Could not find 'cache/fbcahce'"):
        cli("cache=fbcahce")


def test_assess_climb_set_gets_the_same_line(elsewhere: Path) -> None:
    from assess.experiment import ExperimentError, load_experiment

    with pytest.raises(ExperimentError) as error:
        load_experiment("tiny-demo", ["cache=fbcahce"])
    assert str(error.value) == f"experiment=tiny-demo: {ANSWERS['cache=fbcahce']}"


@pytest.mark.slow
def test_a_sweeps_mistyped_option_is_one_line_and_exit_2_from_the_real_cli(tmp_path: Path) -> None:
    result = run_render("-m", "cache=none,fbcahce", f"out_root={tmp_path / 'out'}", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (2, f"error: {ANSWERS['cache=fbcahce']}\n")
    assert not (tmp_path / "out").exists()
