"""The shapes model's checker: a GenEval-style judge of colour, shape and position in an image.

`check(image, caption)` reads the pixels and says whether the caption's colour, shape and position
are there, with plain image analysis (numpy and scipy.ndimage only):

1. Each pixel is explained as a blend of the white background and one palette colour: its
   opacity toward each colour is its projection onto the line white -> colour, and the colour
   whose line passes closest wins. Anti-aliased edges lie on that line, so they keep their colour.
2. Pixels at least half opaque are foreground; the largest connected component is the object.
3. Colour: the majority colour of the object's pixels. Position: its bounding box's centre against the image
   centre (inside the middle window: centre; else the larger offset picks left/right or top/bottom).
   Shape: the template (disc, square, upward triangle) fitted to the object's bounding box that
   overlaps its soft mask best (soft IoU).

The continuous companion `fit` is the soft IoU between the image's opacity map and the *asked*
shape fitted to the object's bounding box: 1 for a crisp shape of the asked kind alone on white;
it falls smoothly with blur, stray blobs, rounded corners or the wrong shape, and is 0 when the
image holds no object.

It lives with the model (numpy and scipy only, no assess import: render never imports assess); the
`shapes` and `shapes_fit` metrics (assess/metrics/shapes.py) and the trade-off evaluation
(assess/metrics/tradeoff.py) read its verdicts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np

from render.errors import RenderError
from render.rundir.redact import shortened
from render.models.shapes.data import (
    BACKGROUND,
    COLOURS,
    POSITIONS,
    SHAPES,
    inside_shape,
    parse_caption,
)

FOREGROUND_OPACITY = 0.5  # a pixel at least this opaque toward its colour belongs to a shape
MIN_AREA = 12  # pixels; a smaller largest component is no object
CENTRE_WINDOW = 3.0 / 32  # |box-centre offset| below this fraction of the image side on both axes: centre
_TEMPLATE_SUPERSAMPLE = 4

_NAMES = list(COLOURS)
_PALETTE = np.array([COLOURS[name] for name in _NAMES], dtype=np.float64)
_WHITE = np.array(BACKGROUND, dtype=np.float64)


@dataclass(frozen=True)
class Verdict:
    """What the checker found in one image, against what its caption asked for."""

    asked: dict[str, str]  # colour, shape, position the caption asks for
    found: dict[str, str | None]  # what the image shows (None: no object)
    fit: float  # soft IoU with the asked shape, 0-1
    area: int  # pixels of the object

    @property
    def colour(self) -> bool:
        return self.found["colour"] == self.asked["colour"]

    @property
    def shape(self) -> bool:
        return self.found["shape"] == self.asked["shape"]

    @property
    def position(self) -> bool:
        return self.found["position"] == self.asked["position"]

    @property
    def correct(self) -> bool:
        return self.colour and self.shape and self.position

    def detail(self) -> str:
        verdicts = {"colour": self.colour, "shape": self.shape, "position": self.position}
        return json.dumps({"correct": self.correct, **verdicts, "asked": self.asked, "found": self.found,
                           "fit": round(self.fit, 4), "area": self.area}, sort_keys=True)


class NotAShapesCaption(RenderError, ValueError):
    """The caption is not a sentence of the shapes grammar."""


def check(image: np.ndarray, caption: str) -> Verdict:
    """Judge an H x W x 3 image (uint8, or floats in [0, 1]) against a shapes caption."""
    spec = parse_caption(caption)
    if spec is None:
        raise NotAShapesCaption(f"{shortened(repr(caption), 120)} is not a shapes caption: expected 'a <colour> <shape> <position>' with colour in "
                                f"{', '.join(COLOURS)}, shape in {', '.join(SHAPES)}, position one of: {', '.join(POSITIONS.values())}")
    pixels = _as_rgb255(image)
    opacity, colour_index = explain_pixels(pixels)
    asked = asdict(spec)
    mask = _largest_component(opacity >= FOREGROUND_OPACITY)
    area = int(mask.sum())
    if area < MIN_AREA:
        return Verdict(asked, {"colour": None, "shape": None, "position": None}, 0.0, area)
    rows, cols = np.nonzero(mask)
    box = (cols.min(), rows.min(), cols.max() + 1, rows.max() + 1)  # x0, y0, x1, y1 in pixel edges
    soft = np.clip(opacity, 0.0, 1.0)
    ious = {shape: soft_iou(soft, template(shape, box, mask.shape)) for shape in SHAPES}
    found: dict[str, str | None] = {
        "colour": _NAMES[int(np.bincount(colour_index[mask], minlength=len(_NAMES)).argmax())],
        "shape": max(ious, key=ious.__getitem__),
        "position": position_of(box, mask.shape),
    }
    return Verdict(asked, found, float(ious[spec.shape]), area)


def explain_pixels(pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pixel: opacity toward its palette colour (0 = background white) and that colour's index.

    A pixel p is read as white + a * (colour - white); a is the projection of p - white onto that
    line, and the colour is the one whose line passes closest to p.
    """
    offset = pixels.reshape(-1, 3) - _WHITE  # N x 3
    directions = _PALETTE - _WHITE  # K x 3
    alphas = np.clip(offset @ directions.T / (directions**2).sum(axis=1), 0.0, None)  # N x K
    residuals = ((offset[:, None, :] - alphas[..., None] * directions[None]) ** 2).sum(axis=2)
    best = residuals.argmin(axis=1)
    opacity = alphas[np.arange(len(best)), best]
    return opacity.reshape(pixels.shape[:2]), best.reshape(pixels.shape[:2])


def template(shape: str, box: tuple[int, int, int, int], size: tuple[int, int]) -> np.ndarray:
    """Soft coverage (H x W) of `shape` stretched to fill the box (x0, y0, x1, y1)."""
    x0, y0, x1, y1 = box
    offsets = (np.arange(_TEMPLATE_SUPERSAMPLE) + 0.5) / _TEMPLATE_SUPERSAMPLE
    ys = (np.arange(size[0])[:, None] + offsets).reshape(-1)
    xs = (np.arange(size[1])[:, None] + offsets).reshape(-1)
    u = (xs[None, :] - (x0 + x1) / 2) / (x1 - x0)
    v = (ys[:, None] - (y0 + y1) / 2) / (y1 - y0)
    inside = inside_shape(shape, u, v)
    return inside.reshape(size[0], _TEMPLATE_SUPERSAMPLE, size[1], _TEMPLATE_SUPERSAMPLE).mean(axis=(1, 3))


def soft_iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.maximum(a, b).sum()
    return float(np.minimum(a, b).sum() / union) if union > 0 else 0.0


def position_of(box: tuple[int, int, int, int], size: tuple[int, int]) -> str:
    """left, right, top, bottom or centre, from the centre of the box (x0, y0, x1, y1).

    The box's centre, not the centroid: a triangle's centroid sits a sixth of its height below.
    """
    x0, y0, x1, y1 = box
    dy = ((y0 + y1) / 2 - size[0] / 2) / size[0]
    dx = ((x0 + x1) / 2 - size[1] / 2) / size[1]
    if abs(dx) < CENTRE_WINDOW and abs(dy) < CENTRE_WINDOW:
        return "centre"
    if abs(dx) >= abs(dy):
        return "left" if dx < 0 else "right"
    return "top" if dy < 0 else "bottom"


def _largest_component(foreground: np.ndarray) -> np.ndarray:
    from scipy import ndimage

    labels, count = ndimage.label(foreground)
    if count == 0:
        return foreground
    sizes = np.bincount(labels.reshape(-1))[1:]
    return labels == (int(sizes.argmax()) + 1)


def _as_rgb255(image: np.ndarray) -> np.ndarray:
    if image.ndim != 3 or image.shape[2] not in (3, 4):
        raise ValueError(f"expected an H x W x 3 RGB image, got shape {image.shape}")
    pixels = image[..., :3].astype(np.float64)
    return pixels * 255.0 if np.issubdtype(image.dtype, np.floating) else pixels
