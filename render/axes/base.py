"""The shape every axis takes: a small base class (optuna's `BaseSampler` is the model) and what an
axis is given to check and to apply itself.

An axis is one lever of a cell: a config group (`render/conf/<name>/<option>.yaml`, checked against
`schema`) or a top-level knob (a bool). It says what of its config enters the cell key (`key`), what
the model's anchor takes (`anchor_key`), how a cell shows it (`label`), whether it is applied at load
(`load_key`: it changes the weights and keys the pipeline cache) or per cell (`apply`, undone by
`reset` before the next cell), and what preflight refuses (`check`). `render.axes.AXES` lists them
in the order they are applied; they are reset in the reverse order.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, Optional

from omegaconf import MISSING

from render.compose.spec import Cell

Record = Dict[str, Any]  # what an apply derived (JSON-able): recorded in the cell's run.json as `<axis>_record`


@dataclass
class Target:
    """What an axis applies itself to: the loaded pipeline, its denoiser, where it runs, the cell's steps."""

    pipe: Any
    denoiser: Any
    device: str
    steps: int = 0
    calibrate: Optional[Callable[[], None]] = None  # renders once with the cell's settings, output discarded (MagCache)
    family: str = ""  # the model family (render/models/families/): which schedulers it has
    scheduler_config: Optional[Dict[str, Any]] = None  # the pipeline's scheduler config as loaded


class Where:
    """Preflight's view of where a cell runs: its device and its pipeline class, inspected only when a
    check asks (a cell of defaults imports no diffusers)."""

    def __init__(self, device: str, device_kind: str, pipeline: str) -> None:
        self.device, self.device_kind, self.pipeline_name = device, device_kind, pipeline

    @functools.cached_property
    def pipeline(self) -> Any:
        """render.compose.introspect.PipelineInfo of the cell's pipeline class (PipelineUnavailable when it has none)."""
        from render.compose.introspect import pipeline_info, quiet_libraries

        quiet_libraries()  # inspecting imports the pipeline's module: keep transformers' import chatter out
        return pipeline_info(self.pipeline_name)

    @functools.cached_property
    def capability(self) -> Optional[tuple[int, int]]:
        """The CUDA compute capability, None on the CPU."""
        if not self.device.startswith("cuda"):
            return None
        import torch

        return tuple(torch.cuda.get_device_capability(self.device))  # type: ignore[return-value]


SCHEMA_GROUP = "schema"  # the ConfigStore group of every schema: an option file names `/schema/<group>@_here_`


class Axis:
    """Base of every axis. A group axis sets `schema` and `default`; a knob sets `field_type` bool."""

    name: ClassVar[str]  # the config key, the Cell's axis name, and (for a group) the folder of its options
    help: ClassVar[str]  # one line for `python -m render --help`
    schema: ClassVar[Optional[type]] = None  # the options' dataclass, stored as `schema/<name>`; None: a knob
    default: ClassVar[Any] = "none"  # the option (group) or the value (knob) a cell takes unless told otherwise

    @property
    def is_group(self) -> bool:
        return self.schema is not None

    def field(self) -> tuple[Any, Any]:
        """(type, default) of the axis' field in the top-level schema (render.compose.schema.RenderConf)."""
        return (Any, MISSING) if self.is_group else (bool, self.default)

    def schemas(self) -> Dict[str, type]:
        """ConfigStore paths of the group's schemas: `schema/<name>`, unless an axis has one per option."""
        return {f"{SCHEMA_GROUP}/{self.name}": self.schema} if self.schema is not None else {}

    def schema_of(self, node: Any) -> Optional[type]:
        """The dataclass a composed node of this group follows (unknown keys are refused against it)."""
        return self.schema

    def key(self, node: Any) -> Any:
        """The value that enters the cell key, from the composed config node; AxisError naming a bad value."""
        raise NotImplementedError

    def anchor_key(self, anchor: Any) -> Any:
        """The anchor's value: what `model.anchor.<name>` names, else the default (no lever applied)."""
        raise NotImplementedError

    def override(self, value: Any) -> str:
        """The command-line override that gives a cell this value (the anchor's command is built from them)."""
        raise NotImplementedError

    def label(self, value: Any) -> str:
        """How `Cell.describe` shows the value; "" leaves it out."""
        return ""

    def load_key(self, value: Any) -> Any:
        """The part of the value applied at load (it changes the weights; it keys the pipeline cache), or None."""
        return None

    def load_kwargs(self, value: Any, source: str, dtype: Any) -> Dict[str, Any]:
        """`from_pretrained` arguments for a load-time value."""
        return {}

    def after_load(self, pipe: Any, denoiser: Any, value: Any, dtype: Any) -> None:
        """What a load-time value applies once the pipeline is loaded (it cannot be undone)."""

    def check(self, value: Any, cell: Cell, where: Where) -> None:
        """Preflight: AxisError (or another RenderError) naming why the value cannot run here or with the cell."""

    def apply(self, value: Any, target: Target) -> Record:
        """Apply the cell's value to the pipeline; return what was derived (recorded in run.json)."""
        return {}

    def reset(self, target: Target) -> None:
        """Undo whatever value a previous cell applied (a no-op when there is nothing to undo)."""


NONE: Dict[str, Any] = {"name": "none"}


class OptionAxis(Axis):
    """A group whose options are one dataclass with a `name`: its key is every field that changes what runs
    (`key_fields`), {"name": "none"} for none."""

    def conf(self, value: Any) -> Any:
        """A node, a dict or a key value as the validated schema instance (its __post_init__ raises AxisError)."""
        from omegaconf import DictConfig, OmegaConf

        values = OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else dict(value)
        assert isinstance(values, dict) and self.schema is not None
        return self.schema(**{str(k): v for k, v in values.items()})

    def key_fields(self, conf: Any) -> Optional[tuple[str, ...]]:
        """The fields of `conf` that enter the key; None: all of them."""
        return None

    def key(self, node: Any) -> Any:
        import dataclasses

        from render.rundir import check_name

        conf = self.conf(node)
        check_name(conf.name, self.name)  # an option name can reach a folder name
        if conf.name == "none":
            return dict(NONE)
        values = dataclasses.asdict(conf)
        fields = self.key_fields(conf)
        return values if fields is None else {k: values[k] for k in fields}

    def anchor_key(self, anchor: Any) -> Any:
        return dict(NONE)

    def override(self, value: Any) -> str:
        return f"{self.name}={value['name']}"

    def label(self, value: Any) -> str:
        return "" if value["name"] == "none" else f"{self.name}={value['name']}"


class NamedAxis(Axis):
    """A group whose options differ by name only (attention, scheduler): the key is the name."""

    def key(self, node: Any) -> Any:
        from render.rundir import check_name

        return check_name(node.name, self.name)

    def anchor_key(self, anchor: Any) -> Any:
        from render.rundir import check_name

        return check_name(anchor[self.name], f"model.anchor.{self.name}")

    def override(self, value: Any) -> str:
        return f"{self.name}={value}"

    def label(self, value: Any) -> str:
        return str(value)
