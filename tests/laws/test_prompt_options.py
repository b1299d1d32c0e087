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


def test_a_reserved_text_is_found_by_its_old_hash_its_identity_or_as_a_phrase_inside_a_longer_prompt() -> None:
    from render.laws.holdout import Reserved
    from render.rundir import holdout_identity, text_hash

    owners = Reserved()
    owners.add("an old ledger", sha=[text_hash("A red cube")])  # an entry of an older version: its hash only
    owners.add("exp-a", identities=[holdout_identity("blue sphere"), holdout_identity("blue sphere on grass")])
    assert owners.owner("A red cube") == "an old ledger"
    assert owners.owner("Blue Sphere") == "exp-a"
    assert owners.owner("a photo of a blue sphere on grass at noon") == "exp-a"  # contained, a phrase of whole words
    assert owners.owner("a blue spheres photo") is None and "a green cone" not in owners


def test_timing_a_fresh_text_is_allowed_and_a_shipped_holdout_text_is_refused(tmp_path: Path) -> None:
    from render.compose.splits import load_prompts
    from render.laws.holdout import check_timed_texts, shipped_holdouts

    check_timed_texts(None, [tmp_path], ["a text no holdout holds"], ["k"], final=False)
    manifest = next(iter(shipped_holdouts()))
    held = load_prompts(str(manifest))[0].text
    with pytest.raises(HoldoutLocked) as refused:
        check_timed_texts(None, [tmp_path], [held], ["k"], final=False)
    assert str(refused.value).startswith(f"1 text(s) to time belong to a locked holdout (the shipped holdout manifest "
                                         f"{manifest.name}), e.g. {held!r}: a holdout is seen once")
