"""Every axis has one shape and everything about the axes is derived from render.axes.AXES."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from render import axes
from render.axes.base import Axis
from render.compose.schema import RenderConf
from tests.conftest import CONF_DIR
from tests.test_layers import imports_of, project_modules


def test_the_cell_module_is_a_leaf() -> None:
    """render.compose.spec (Cell, ModelSpec) imports no registry: every module can name a cell without a cycle."""
    modules = project_modules()
    assert imports_of("render.compose.spec", modules["render.compose.spec"], modules) <= {"render.rundir"}


def test_the_top_level_schema_has_one_field_per_axis() -> None:
    fields = {f.name: f for f in dataclasses.fields(RenderConf)}
    for axis in axes.AXES:
        assert axis.name in fields, axis.name
        assert (fields[axis.name].type, fields[axis.name].default) == axis.field()


def test_each_group_has_its_folder_and_config_yaml_takes_its_default() -> None:
    defaults = yaml.safe_load((Path(CONF_DIR) / "config.yaml").read_text())["defaults"]
    chosen = {k: v for d in defaults if isinstance(d, dict) for k, v in d.items()}
    for axis in axes.GROUPS:
        assert (Path(CONF_DIR) / axis.name / f"{axis.default}.yaml").is_file(), axis.name
        assert chosen.get(axis.name) == axis.default, f"config.yaml's defaults must take {axis.name}: {axis.default}"


def test_every_axis_is_an_axis_with_its_own_name() -> None:
    assert all(isinstance(a, Axis) for a in axes.AXES)
    assert len(axes.BY_NAME) == len(axes.AXES)


def test_the_order_is_the_order_things_must_be_applied_in() -> None:
    names = [a.name for a in axes.AXES]
    assert names.index("scheduler") < names.index("cache")  # MagCache calibrates with the cell's scheduler
    assert names[-1] == "compile"  # it traces whatever hooks were applied before it


def test_configure_undoes_backwards_then_applies_forwards(monkeypatch) -> None:
    calls: list[str] = []
    for axis in axes.AXES:
        monkeypatch.setattr(axis, "reset", lambda target, n=axis.name: calls.append(f"reset {n}"))
        monkeypatch.setattr(axis, "apply", lambda value, target, n=axis.name: calls.append(f"apply {n}") or {})
    from render.cell import build_job
    from tests.conftest import compose_cfg

    cell = build_job(compose_cfg("model=tiny", "device=cpu")).cell
    axes.configure(axes.Target(None, None, "cpu"), cell)
    names = [a.name for a in axes.AXES]
    assert calls == [f"reset {n}" for n in reversed(names)] + [f"apply {n}" for n in names]


def test_help_lists_every_group_and_knob() -> None:
    from render.compose.help import groups, groups_help

    text = groups_help()
    assert all(a.name in groups() for a in axes.GROUPS)
    assert all(f"  {k.name}  " in text for k in axes.KNOBS)
