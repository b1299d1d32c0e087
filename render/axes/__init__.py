"""Every lever of a cell, in one ordered list: `AXES`.

Each axis is one module here (its schema, key, checks, apply and undo: render.axes.base.Axis) plus,
for a config group, one YAML per option under `render/conf/<group>/`. Everything else is derived
from the list: the top-level schema's fields (render.compose.schema), a cell's axis values and its
`describe()` (render.cell), `--help`'s groups (render.compose.help), the pipeline cache's load-time key and
`from_pretrained` arguments (render.run.loader), the reset/apply loop of `configure` and preflight's
checks. The order is the order of application (scheduler before the cache, which MagCache's
calibration renders with; the cache hooks before compile, which traces them); undo runs backwards.

A model's anchor takes none of the speed levers: it stays the model's reference, so fidelity to the
anchor shows each lever's quality cost. Imports no torch at import time.
"""

from __future__ import annotations

import json
from typing import Any, Dict

from render.axes import attention, caches, compile, offload, parallel, quant, scheduler, toggles
from render.axes.base import SCHEMA_GROUP, Axis, Record, Target, Where
from render.axes.errors import AxisError
from render.compose.spec import Cell

AXES: tuple[Axis, ...] = (
    parallel.AXIS,  # at load: enable_parallelism shards the denoiser for good
    attention.AXIS,
    scheduler.AXIS,
    quant.AXIS,  # at load
    *toggles.TOGGLES,
    offload.AXIS,  # layerwise at load, model and group per cell
    caches.AXIS,
    compile.AXIS,  # last: it traces the hooks applied before it
)
BY_NAME: Dict[str, Axis] = {axis.name: axis for axis in AXES}
GROUPS: tuple[Axis, ...] = tuple(a for a in AXES if a.is_group)
KNOBS: tuple[Axis, ...] = tuple(a for a in AXES if not a.is_group)

__all__ = ["AXES", "BY_NAME", "GROUPS", "KNOBS", "SCHEMA_GROUP", "Axis", "AxisError", "Record", "Target", "Where",
           "after_load", "axis_values", "anchor_values", "check_cell", "configure", "default_warmups", "load_kwargs", "load_options",
           "labels", "register"]


def axis_values(cfg: Any) -> Dict[str, Any]:
    """Each axis' key value from the composed config (validated once, here); AxisError or CacheConfigError naming a bad one."""
    return {axis.name: axis.key(cfg[axis.name]) for axis in AXES}


def anchor_values(anchor: Any) -> Dict[str, Any]:
    """The anchor cell's axis values, from the model's `anchor` node."""
    return {axis.name: axis.anchor_key(anchor) for axis in AXES}


def labels(values: Dict[str, Any]) -> Dict[str, str]:
    return {axis.name: axis.label(values[axis.name]) for axis in AXES}


def overrides(values: Dict[str, Any]) -> list[str]:
    """The command-line overrides that give a cell these axis values."""
    return [axis.override(values[axis.name]) for axis in AXES]


def check_cell(cell: Cell, device: str) -> None:
    """Preflight: every axis checks its value here and with the rest of the cell."""
    where = Where(device, cell.device_kind, cell.model.pipeline)
    for axis in AXES:
        axis.check(cell.axes[axis.name], cell, where)


def load_options(cell: Cell) -> str:
    """The load-time values of a cell, as a hashable key for the pipeline cache ("" when none)."""
    load = {a.name: v for a in AXES if (v := a.load_key(cell.axes[a.name])) is not None}
    return json.dumps(load, sort_keys=True) if load else ""


def load_kwargs(load: str, source: str, dtype: Any) -> Dict[str, Any]:
    """`from_pretrained` arguments for these load options (`quantization_config`, ...)."""
    kwargs: Dict[str, Any] = {}
    for name, value in (json.loads(load) if load else {}).items():
        kwargs.update(BY_NAME[name].load_kwargs(value, source, dtype))
    return kwargs


def after_load(pipe: Any, denoiser: Any, load: str, dtype: Any) -> None:
    """What the load options apply once the pipeline is loaded (layerwise casting): cannot be undone."""
    for name, value in (json.loads(load) if load else {}).items():
        BY_NAME[name].after_load(pipe, denoiser, value, dtype)


def configure(target: Target, cell: Cell) -> Dict[str, Record]:
    """Undo whatever a previous cell applied (backwards), then apply this cell's axes in order.
    Returns each axis' non-empty record (the cache's derived values, ...)."""
    for axis in reversed(AXES):
        axis.reset(target)
    records = {}
    for axis in AXES:
        record = axis.apply(cell.axes[axis.name], target)
        if record:
            records[axis.name] = record
    return records


def default_warmups(cell: Cell) -> int:
    """Calls whose latency is not a warm figure: the first; with compile a second (the first compiles,
    the second may still recompile as guards settle); with compile and a cache a third (the cache's
    skip branch can first run, and compile, after its reuse warms up)."""
    compiled = cell.axes["compile"]["name"] != "none"
    return 1 + compiled + (compiled and cell.axes["cache"]["name"] != "none")


def register(cs: Any) -> None:
    """Store each group's schemas in Hydra's ConfigStore, under `schema/` (`schema/<group>`, the cache's one per
    method `schema/cache/<method>`): never in the group itself, where they would be listed as its options."""
    for axis in GROUPS:
        for path, schema in axis.schemas().items():
            group, _, name = path.rpartition("/")
            cs.store(group=group, name=name, node=schema)
