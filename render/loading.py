"""What `from_pretrained` loads for a model: its pipeline class and its folder or hub id.

Import-light and free of other render modules, so the cache support check (render.caches) and the
pipeline cache (render.pipeline) can both use it without importing each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from render.errors import RenderError

if TYPE_CHECKING:
    from render.cell import ModelSpec

BUILTIN_PREFIX = "hypergrid:"


class ModelUnavailable(RenderError, ValueError):
    """A model id that names no model the project can build."""


def builtin_models() -> dict[str, Any]:
    """Models the project builds itself: name -> function returning the saved folder."""
    from render.models.shapes import shapes_model_dir
    from render.models.tiny import ensure_tiny

    return {"tiny": ensure_tiny, "shapes": shapes_model_dir}


def builtin_folder(model_id: str) -> Path:
    """The folder of a built-in model (`hypergrid:<name>`), built first when it is not there yet."""
    name = model_id[len(BUILTIN_PREFIX):]
    builders = builtin_models()
    if name not in builders:
        raise ModelUnavailable(f"model.id={model_id}: no built-in model {name!r}; built-in: {', '.join(BUILTIN_PREFIX + n for n in builders)}")
    return Path(builders[name]())


def model_source(model: ModelSpec) -> str:
    """The folder or hub id that from_pretrained loads."""
    if model.id.startswith(BUILTIN_PREFIX):
        return str(builtin_folder(model.id))
    return str(Path(model.id).expanduser()) if model.id.startswith((".", "/", "~")) else model.id


def pipeline_class(name: str) -> type:
    """`model.pipeline`: a dotted import path ("render.models.shapes.ShapesPipeline") or a diffusers class name."""
    import importlib

    import diffusers

    if "." not in name:
        return getattr(diffusers, name)
    module, _, attribute = name.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


def quiet_libraries() -> None:
    """diffusers/transformers progress bars and INFO chatter would bury the cell's own progress."""
    import diffusers
    import transformers

    diffusers.utils.logging.set_verbosity_error()
    diffusers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
