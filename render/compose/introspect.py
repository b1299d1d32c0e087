"""The one way a pipeline class is resolved and inspected: `model.pipeline` is a diffusers class name
("FluxPipeline") or a dotted import path ("render.models.shapes.ShapesPipeline"), both for loading and
for preflight's checks. Imports diffusers only when called.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import types
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
    declared = {c: _one_class(hints.get(c)) for c in components}
    return PipelineInfo(name, cls, components, declared)


def _one_class(annotation: Any) -> Any:
    """The class a component is annotated with; an optional one (`X | None`, WanPipeline's transformer) is X;
    UNKNOWN for anything else (a union of classes, an unresolvable name)."""
    if isinstance(annotation, type) and not isinstance(annotation, types.GenericAlias):
        return annotation
    members = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(members) == 1 and isinstance(members[0], type):
        return members[0]
    return UNKNOWN


def quiet_libraries() -> None:
    """diffusers/transformers progress bars and INFO chatter would bury the cell's own progress."""
    import diffusers
    import transformers

    diffusers.utils.logging.set_verbosity_error()
    diffusers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


@functools.lru_cache(maxsize=None)
def cache_context_fields(cls: type[Any]) -> Optional[frozenset[str]]:
    """The CacheContext fields (step_index, sigma, ...) every `cache_context(...)` call in the pipeline's `__call__`
    passes, as keywords or as `**kwargs` of a dict literal built there; an empty set when it enters none; None
    when its source cannot be read. diffusers' cache hooks read where the denoising loop is from these."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls.__call__)))
    except (AttributeError, OSError, TypeError, SyntaxError):  # no __call__, no source (a builtin, a REPL class)
        return None
    dicts = {target.id: {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
             for node in ast.walk(tree) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
             for target in node.targets if isinstance(target, ast.Name)}
    calls = [node for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "cache_context"]
    passed = [{kw.arg for kw in call.keywords if kw.arg is not None}
              | {key for kw in call.keywords if kw.arg is None and isinstance(kw.value, ast.Name) for key in dicts.get(kw.value.id, ())}
              for call in calls]
    return frozenset(set.intersection(*passed)) if passed else frozenset()
