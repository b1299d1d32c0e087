"""The shapes model: a small text-to-image pipeline the project trains itself, shipped with its weights.

It draws one coloured shape on white from captions such as "a blue square on the left"
(`data.py`: the grammar and the procedural dataset), with a pixel-space `FluxTransformer2DModel`
and learned word embeddings (`pipeline.py`), trained by scripts/train_shapes.py; its quality is
measurable offline with the checker in render/models/shapes/checker.py. See docs/shapes.md.

Importing this package imports neither torch nor diffusers; `ShapesPipeline` and
`ShapesTextEncoder` are loaded on first use, so `render.models.shapes.ShapesPipeline` works as a
dotted pipeline path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

WEIGHTS_DIR = Path(__file__).parent / "weights"

__all__ = ["ShapesPipeline", "ShapesTextEncoder", "shapes_model_dir"]


def shapes_model_dir() -> Path:
    """The folder of the shipped, trained pipeline (`ShapesPipeline.from_pretrained` loads it)."""
    if not (WEIGHTS_DIR / "model_index.json").is_file():
        raise FileNotFoundError(
            f"{WEIGHTS_DIR} holds no trained shapes pipeline (no model_index.json); "
            "train and export it with: python scripts/train_shapes.py --export"
        )
    return WEIGHTS_DIR


def __getattr__(name: str) -> Any:
    if name == "ShapesPipeline":
        from render.models.shapes.pipeline import ShapesPipeline

        return ShapesPipeline
    if name == "ShapesTextEncoder":
        from render.models.shapes.text_encoder import ShapesTextEncoder

        return ShapesTextEncoder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
