"""The procedural captioned dataset the shapes model is trained on: one coloured shape on white.

A caption comes from a small grammar, exactly the texts of the project's prompt manifests
(render/prompts/{dev,holdout,smoke}.jsonl): "a {colour} {shape} {position}", e.g.
"a blue square on the left". Images are drawn on the fly with 4x4 supersampled (anti-aliased)
edges, from a numpy `Generator` only, so a seed fixes every caption and every pixel.

numpy only: the checker (render/models/shapes/checker.py) imports the palette and the grammar from here
without importing torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

IMAGE_SIZE = 32  # pixels, square
BACKGROUND = (255, 255, 255)
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 160, 50),
    "blue": (35, 65, 225),
    "yellow": (240, 205, 20),
    "purple": (135, 40, 170),
    "orange": (245, 125, 20),
}
SHAPES = ("circle", "square", "triangle")  # triangles point up
POSITIONS: dict[str, str] = {  # name -> the caption's phrase
    "left": "on the left",
    "right": "on the right",
    "top": "at the top",
    "bottom": "at the bottom",
    "centre": "in the centre",
}

SIDE_RANGE = (14.0, 18.0)  # side of the shape's bounding box, pixels
EDGE_MARGIN = (1.0, 2.5)  # gap between the shape and the image edge it is placed against, pixels
CROSS_JITTER = 1.5  # offset from the image's centre line across the placement direction, pixels
COLOUR_JITTER = 8  # per-channel colour offset, 8-bit levels
_SUPERSAMPLE = 4

_CAPTION = re.compile(
    r"^a (?P<colour>{}) (?P<shape>{}) (?P<position>{})$".format(
        "|".join(COLOURS), "|".join(SHAPES), "|".join(POSITIONS.values())
    )
)


@dataclass(frozen=True)
class Spec:
    """What a caption asks for."""

    colour: str
    shape: str
    position: str  # a key of POSITIONS

    @property
    def caption(self) -> str:
        return f"a {self.colour} {self.shape} {POSITIONS[self.position]}"


def all_specs() -> list[Spec]:
    """Every caption of the grammar, in a fixed order (6 colours x 3 shapes x 5 positions)."""
    return [Spec(c, s, p) for c in COLOURS for s in SHAPES for p in POSITIONS]


def parse_caption(text: str) -> Spec | None:
    """The spec a caption asks for; None when the text is not a caption of the grammar."""
    match = _CAPTION.match(" ".join(text.lower().split()))
    if match is None:
        return None
    position = next(k for k, v in POSITIONS.items() if v == match["position"])
    return Spec(match["colour"], match["shape"], position)


def vocabulary() -> list[str]:
    """Every word the grammar uses, in a fixed order."""
    words: list[str] = ["a", *COLOURS, *SHAPES]
    for phrase in POSITIONS.values():
        words += [w for w in phrase.split() if w not in words]
    return words


def sample_specs(rng: np.random.Generator, n: int) -> list[Spec]:
    specs = all_specs()
    return [specs[i] for i in rng.integers(0, len(specs), size=n)]


def draw(spec: Spec, rng: np.random.Generator, size: int = IMAGE_SIZE) -> np.ndarray:
    """One image of `spec` (H x W x 3 uint8): size, placement and colour drawn from `rng`."""
    side = rng.uniform(*SIDE_RANGE) * size / IMAGE_SIZE
    margin = rng.uniform(*EDGE_MARGIN) * size / IMAGE_SIZE
    cross = rng.uniform(-CROSS_JITTER, CROSS_JITTER, size=2) * size / IMAGE_SIZE
    cx, cy = _centre(spec.position, side, margin, cross, size)
    colour = np.clip(np.array(COLOURS[spec.colour]) + rng.integers(-COLOUR_JITTER, COLOUR_JITTER + 1, size=3), 0, 255)
    alpha = coverage(spec.shape, cx, cy, side, size)[..., None]
    image = alpha * colour + (1.0 - alpha) * np.array(BACKGROUND)
    return np.round(image).astype(np.uint8)


def sample_batch(rng: np.random.Generator, n: int, size: int = IMAGE_SIZE) -> tuple[np.ndarray, list[str]]:
    """`n` images (n x H x W x 3 uint8) and their captions."""
    specs = sample_specs(rng, n)
    return np.stack([draw(spec, rng, size) for spec in specs]), [spec.caption for spec in specs]


def coverage(shape: str, cx: float, cy: float, side: float, size: int) -> np.ndarray:
    """Fraction of each pixel the shape covers (H x W floats in [0, 1]), by 4x4 supersampling.

    The shape fills the square box of `side` pixels centred at (cx, cy), in pixel coordinates
    where pixel (i, j) spans [j, j+1] x [i, i+1].
    """
    offsets = (np.arange(_SUPERSAMPLE) + 0.5) / _SUPERSAMPLE
    coords = (np.arange(size)[:, None] + offsets[None, :]).reshape(-1)
    inside = inside_shape(shape, (coords[None, :] - cx) / side, (coords[:, None] - cy) / side)
    return inside.reshape(size, _SUPERSAMPLE, size, _SUPERSAMPLE).mean(axis=(1, 3))


def inside_shape(shape: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Whether points (u, v), in units of the box side from its centre (v grows down), are inside."""
    if shape == "circle":
        return u**2 + v**2 <= 0.25
    if shape == "square":
        return (np.abs(u) <= 0.5) & (np.abs(v) <= 0.5)
    if shape == "triangle":  # apex at the top centre, base along the bottom edge
        return (v <= 0.5) & (np.abs(u) <= (v + 0.5) / 2)
    raise ValueError(f"shape={shape!r}: valid shapes are {', '.join(SHAPES)}")


def _centre(position: str, side: float, margin: float, cross: np.ndarray, size: int) -> tuple[float, float]:
    middle = size / 2
    near, far = side / 2 + margin, size - side / 2 - margin
    cx, cy = middle + cross[0], middle + cross[1]
    if position == "left":
        cx = near
    elif position == "right":
        cx = far
    elif position == "top":
        cy = near
    elif position == "bottom":
        cy = far
    elif position != "centre":
        raise ValueError(f"position={position!r}: valid positions are {', '.join(POSITIONS)}")
    return cx, cy
