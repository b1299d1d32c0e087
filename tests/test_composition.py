"""Each distinct config composed once per invocation (render.compose.composition, issue 22), and every
config the memo hands out is the one Hydra composes without it: values, flags, node types, errors."""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from hydra._internal import config_loader_impl
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.config_repository import ConfigRepository
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import DictConfig, ListConfig, OmegaConf

from render.compose.composition import PATCHES, SUPPORTED, composed_once
from tests.conftest import CONF_DIR

# The overrides a cell is made of: config choices, value overrides of every kind (set, add, force-add, delete,
# inside a chosen group, on Hydra's own node), and bad ones (a wrong type, a missing option, a key no config has).
CHOICES = ["model=shapes", "model=tiny", "cache=none", "cache=fbcache", "cache=magcache", "attention=native",
           "attention=math", "scheduler=euler", "scheduler=default", "prompts=dev", "prompts=smoke"]
VALUES = ["steps=4", "steps=8", "seed=3", "prompts.limit=2", "render_anchor=false", "+extra=1", "++seed=5",
          "~render_anchor", "cache.threshold=0.2", "hydra.job.name=other", "hydra.verbose=true", "steps=abc",
          "cache=turbo", "no_such_key=1", "prompts.limit=[1,2]"]
OVERRIDES = st.lists(st.sampled_from(CHOICES + VALUES), max_size=5)


def shape(node: Any, path: str = "") -> list[tuple[str, Any, Any, Any]]:
    """(path, node type, struct flag, readonly flag) of every container node: what a value comparison misses."""
    rows = [(path, OmegaConf.get_type(node) if isinstance(node, DictConfig) else list, node._get_node_flag("struct"),
             node._get_node_flag("readonly"))]
    for key in node.keys() if isinstance(node, DictConfig) else range(len(node)):
        child = node._get_node(key)
        if isinstance(child, (DictConfig, ListConfig)):
            rows.extend(shape(child, f"{path}.{key}"))
    return rows


def outcome(overrides: list[str]) -> tuple[Any, ...]:
    """Everything a composition hands its caller: the config whole (hydra node included), or the error."""
    try:
        cfg = compose(config_name="config", overrides=overrides, return_hydra_config=True)
    except Exception as error:  # noqa: BLE001 - the error is part of the outcome compared
        return ("error", type(error).__name__, str(error))
    return ("config", OmegaConf.to_container(cfg, resolve=False), shape(cfg))


def outcomes(cells: list[list[str]], *, memo: bool, patches: tuple[str, ...] = PATCHES) -> list[tuple[Any, ...]]:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        if not memo:
            return [outcome(cell) for cell in cells]
        with composed_once(patches):
            return [outcome(cell) for cell in cells]


# Each patch of Hydra's internals alone, held to Hydra's own result on cells that exercise it twice: the same
# file loaded again, the same defaults list with other values, the same merge, a bad override after a good one.
EACH_ALONE = [["model=tiny", "steps=4"], ["model=tiny", "steps=8", "cache=fbcache"], ["model=tiny", "steps=abc"],
              ["model=shapes", "+extra=1", "prompts=dev"], ["model=tiny", "steps=4"], ["cache=turbo"],
              ["~render_anchor", "hydra.job.name=other"], ["model=tiny", "cache=magcache", "cache.threshold=0.2"]]


@pytest.mark.slow
@pytest.mark.parametrize("patch", PATCHES)
def test_each_patch_alone_composes_what_hydra_does(patch: str) -> None:
    assert outcomes(EACH_ALONE, memo=True, patches=(patch,)) == outcomes(EACH_ALONE, memo=False)


def test_an_unknown_patch_is_refused_naming_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown patch.*'merged'.*load, defaults, merge, store"):
        with composed_once(("merged",)):
            pass


def test_the_tested_hydra_line_is_the_one_installed() -> None:
    assert SUPPORTED  # pyproject pins hydra-core 1.3; outside it nothing is memoised (and this says so)


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OVERRIDES, min_size=2, max_size=4))
def test_a_memoised_composition_is_hydras_own(cells: list[list[str]]) -> None:
    cells = [*cells, cells[0], [*cells[0], "steps=5"]]  # a config again, and with one more value override
    assert outcomes(cells, memo=True) == outcomes(cells, memo=False)


def test_cells_that_differ_in_values_share_one_merge_and_one_defaults_list() -> None:
    originals = {"merge": 0, "defaults": 0}
    merge, defaults = ConfigLoaderImpl._compose_config_from_defaults_list, config_loader_impl.create_defaults_list

    def counted_merge(self: ConfigLoaderImpl, *args: Any, **kwargs: Any) -> Any:
        originals["merge"] += 1
        return merge(self, *args, **kwargs)

    def counted_defaults(*args: Any, **kwargs: Any) -> Any:
        originals["defaults"] += 1
        return defaults(*args, **kwargs)

    ConfigLoaderImpl._compose_config_from_defaults_list = counted_merge  # type: ignore[method-assign]
    config_loader_impl.create_defaults_list = counted_defaults
    try:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"), composed_once():
            steps = [compose(config_name="config", overrides=["model=tiny", f"steps={n}", f"seed={n}"]).steps
                     for n in range(1, 11)]
            compose(config_name="config", overrides=["model=tiny", "cache=fbcache", "steps=3"])
    finally:
        ConfigLoaderImpl._compose_config_from_defaults_list = merge  # type: ignore[method-assign]
        config_loader_impl.create_defaults_list = defaults
    assert steps == list(range(1, 11))
    assert originals == {"merge": 2, "defaults": 2}  # ten cells of one choice set, then another choice set


def test_a_handed_out_config_is_its_callers_own() -> None:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"), composed_once():
        first = compose(config_name="config", overrides=["model=tiny"])
        OmegaConf.set_struct(first, False)
        first.model.id, first.steps = "changed", 99
        first.injected = True
        again = compose(config_name="config", overrides=["model=tiny"])
    assert again.model.id != "changed" and again.steps != 99 and "injected" not in again


def test_a_config_file_edited_after_an_invocation_is_read_again_by_the_next(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "config.yaml").write_text("steps: 4\n")
    for steps in (4, 8):
        (conf / "config.yaml").write_text(f"steps: {steps}\n")
        with initialize_config_dir(config_dir=str(conf), version_base="1.3"), composed_once():
            assert compose(config_name="config").steps == steps


def test_hydra_is_left_as_it_was_after_the_block() -> None:
    before = (ConfigRepository.load_config, config_loader_impl.create_defaults_list,
              ConfigLoaderImpl._compose_config_from_defaults_list, ConfigStore.__dict__.get("__deepcopy__"))
    with composed_once():
        with composed_once():  # nested: the outer block's memo
            assert ConfigRepository.load_config is not before[0]
        assert ConfigRepository.load_config is not before[0]
        assert copy.deepcopy(ConfigStore.instance()) is ConfigStore.instance()
    after = (ConfigRepository.load_config, config_loader_impl.create_defaults_list,
             ConfigLoaderImpl._compose_config_from_defaults_list, ConfigStore.__dict__.get("__deepcopy__"))
    assert after == before
    assert copy.deepcopy(ConfigStore.instance()) is not ConfigStore.instance()
    assert not GlobalHydra.instance().is_initialized()


def test_a_group_left_missing_is_skipped_for_the_master_and_refused_for_a_cell(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    (conf / "db").mkdir(parents=True)
    (conf / "config.yaml").write_text("defaults:\n  - db: ???\n  - _self_\nsteps: 4\n")
    (conf / "db" / "mysql.yaml").write_text("host: localhost\n")

    def both(memo: bool) -> list[tuple[Any, ...]]:
        from hydra.types import RunMode

        with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
            loader = GlobalHydra.instance().config_loader()
            results = []
            with composed_once() if memo else contextlib.nullcontext():
                for mode, overrides in [(RunMode.MULTIRUN, ["steps=5"]), (RunMode.RUN, ["steps=6"]),
                                        (RunMode.RUN, ["db=mysql", "steps=7"]), (RunMode.MULTIRUN, ["db=mysql"])]:
                    try:
                        cfg = loader.load_configuration("config", overrides, run_mode=mode)
                        results.append(("config", OmegaConf.to_container(cfg, resolve=False)))
                    except Exception as error:  # noqa: BLE001
                        results.append(("error", type(error).__name__, str(error)))
            return results

    plain = both(memo=False)
    assert [r[0] for r in plain] == ["config", "error", "config", "config"]  # a cell must name its db
    assert both(memo=True) == plain
