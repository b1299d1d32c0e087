"""The scheduler axis: option name -> scheduler class and settings, as each model family declares them
(`Family.schedulers`, render/models/families/).

`default` keeps the scheduler the pipeline was saved with. The others are rebuilt from the
pipeline's original scheduler config each time, so cells never inherit a previous cell's scheduler.
A new scheduler is one entry in the schedulers of each family that takes it and one option file
`render/conf/scheduler/<name>.yaml`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

from render.axes.base import NamedAxis, Record, Target, Where
from render.errors import RenderError
from render.models.families import family as model_family
from render.compose.spec import Cell


class SchedulerUnavailable(RenderError, ValueError):
    """A scheduler option the model family does not have."""


@dataclass
class SchedulerConf:
    name: str = MISSING  # option name; "default" keeps the pipeline's own scheduler


def check_scheduler_supported(name: str, family: str) -> None:
    if name == "default":
        return
    options = model_family(family).schedulers
    if name not in options:
        valid = ", ".join(["default", *options])
        raise SchedulerUnavailable(f"scheduler={name} is not available for the {family} model family; valid: {valid}")


def apply_scheduler(pipe: Any, name: str, family: str, original_config: Any) -> None:
    """Give `pipe` a fresh scheduler for `name`, built from the pipeline's original scheduler config."""
    import diffusers

    if name == "default":
        cls, kwargs = diffusers.__dict__[original_config["_class_name"]], {}
    else:
        spec = model_family(family).schedulers[name]
        cls, kwargs = getattr(diffusers, spec.cls), spec.kwargs
    pipe.scheduler = cls.from_config(original_config, **kwargs)


class SchedulerAxis(NamedAxis):
    name = "scheduler"
    help = "the sampler; default keeps the pipeline's own"
    schema = SchedulerConf
    default = "default"

    def check(self, value: Any, cell: Cell, where: Where) -> None:
        check_scheduler_supported(value, cell.model.family)

    def apply(self, value: Any, target: Target) -> Record:
        apply_scheduler(target.pipe, value, target.family, target.scheduler_config)
        return {}


AXIS = SchedulerAxis()
