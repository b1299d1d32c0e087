"""What a cell *is*: the model it loads and every value that changes its pixels or timing.

A leaf: it imports no registry (the axes build a cell's axis values, render.cell validates the rest),
so every module can name a `Cell` or a `ModelSpec` without an import cycle.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from render.rundir import Name, cell_key_of


class DType(Name):
    """A weights dtype (members named as their values: Hydra and OmegaConf read an override by the member's name)."""

    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    id: str
    revision: str | None
    pipeline: str
    family: str
    dtype: str
    max_sequence_length: int | None
    weights: str = ""  # what the weights are, by content (render.rundir.identity.model_identity): in the cell key
    num_frames: int | None = None  # a clip's frames (clip families only): in the key
    fps: int | None = None  # a clip's playback rate, written into its file: in the key

    def canonical(self) -> dict[str, Any]:
        """The model as its cell key hashes it: an image model's key has no frame fields (its pinned keys predate them)."""
        return {k: v for k, v in asdict(self).items() if k not in _CLIP_FIELDS or v is not None}


_CLIP_FIELDS = ("num_frames", "fps")


@dataclass(frozen=True)
class Cell:
    """Exactly what changes pixels or timing; `key` hashes nothing else.

    `axes` holds each axis' value as it enters the key (render.axes.AXES, in that order): a name for
    attention and scheduler, a dict of parameters for cache, compile, quant and offload, a bool for a
    toggle; None for an axis left out of the key at its default (parallel=none). `labels` is how `describe`
    shows each value ("" leaves it out); it is not part of the key.
    """

    model: ModelSpec
    device_kind: str
    steps: int
    guidance: float
    height: int
    width: int
    axes: dict[str, Any]
    labels: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    batch: int = 1  # samples per pipeline call (docs/axes.md: batch); in the key from 2 on, so older keys stay the same

    def canonical(self) -> dict[str, Any]:
        return {"model": self.model.canonical(), "device_kind": self.device_kind, "steps": self.steps,
                "guidance": self.guidance, "height": self.height, "width": self.width,
                **{name: value for name, value in self.axes.items() if value is not None},  # None: an axis at a default
                # that came after keys were pinned (parallel=none), so every older key stays the same
                **({"batch": self.batch} if self.batch > 1 else {})}

    @cached_property
    def key(self) -> str:  # hashed once per cell: every sample's lookup asks for it (a Cell is never changed)
        return cell_key_of(self.canonical())

    def describe(self) -> str:
        parts = [self.model.name, *(label for label in self.labels.values() if label)]
        return " ".join([*parts, f"{self.steps} steps {self.height}x{self.width}",
                         *([f"batch {self.batch}"] if self.batch > 1 else [])])
