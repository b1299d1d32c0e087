"""The one way a pipeline class is resolved and inspected: `model.pipeline` is a diffusers class name
("FluxPipeline") or a dotted import path ("render.models.shapes.ShapesPipeline"), both for loading and
for preflight's checks. Imports diffusers only when called.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import typing
from dataclasses import dataclass
from typing import Any, Optional

from render.errors import RenderError

UNKNOWN: Any = object()  # a component declared as a union or an unresolvable name: checked on the loaded pipeline


class PipelineUnavailable(RenderError, ValueError):
    """`model.pipeline` names no importable pipeline class."""


def pipeline_class(name: str) -> type[Any]:
    """`model.pipeline` as a class: PipelineUnavailable naming it when it cannot be imported.

    Any class: a diffusers pipeline or one of the user's own, called by its diffusers-shaped API."""
    import diffusers

    module, _, attribute = name.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module) if module else diffusers, attribute)
    except (ImportError, AttributeError) as error:
        where = f"diffusers {diffusers.__version__} has no pipeline class {name}" if not module else f"cannot import {name} ({error})"
        raise PipelineUnavailable(f"model.pipeline={name}: {where}; give a diffusers pipeline class name "
                                  "(e.g. FluxPipeline) or a dotted path to your own (package.module.MyPipeline)") from None
    if not isinstance(cls, type):
        raise PipelineUnavailable(f"model.pipeline={name}: {cls!r} is not a class")
    return cls


@dataclass(frozen=True)
class PipelineInfo:
    """What a pipeline class declares: its components (its __init__ parameters) and their classes."""

    name: str
    cls: type[Any]
    components: tuple[str, ...]
    declared: dict[str, Any]  # component -> its annotated class, or UNKNOWN

    @property
    def transformer(self) -> Optional[type]:
        """The transformer class it declares; None without one (a UNet pipeline); UNKNOWN when not a plain class."""
        return self.declared.get("transformer") if "transformer" in self.components else None

    @property
    def denoiser(self) -> Optional[type]:
        """The transformer's or the UNet's class, None when neither is a plain class."""
        for component in ("transformer", "unet"):
            declared = self.declared.get(component)
            if isinstance(declared, type):
                return declared
        return None


def _annotations(cls: type[Any]) -> dict[str, Any]:
    """The __init__ annotations, resolved: string ones in their module's namespace, then in diffusers'."""
    import diffusers

    try:
        return typing.get_type_hints(cls.__init__)
    except Exception:  # noqa: BLE001 - an unresolvable annotation: fall back to each one alone
        raw = {n: p.annotation for n, p in inspect.signature(cls.__init__).parameters.items()}
        return {n: getattr(diffusers, a, UNKNOWN) if isinstance(a, str) else a for n, a in raw.items()}


@functools.lru_cache(maxsize=None)
def pipeline_info(name: str) -> PipelineInfo:
    cls = pipeline_class(name)
    components = tuple(p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs"))
    hints = _annotations(cls)
    declared = {c: (hints[c] if isinstance(hints.get(c), type) else UNKNOWN) for c in components}
    return PipelineInfo(name, cls, components, declared)


def quiet_libraries() -> None:
    """diffusers/transformers progress bars and INFO chatter would bury the cell's own progress."""
    import diffusers
    import transformers

    diffusers.utils.logging.set_verbosity_error()
    diffusers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
