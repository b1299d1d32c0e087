"""What the code downstream of preflight can take: finite floats, integers the index (sqlite) and the
generator can hold, images the scorer can read back. Checked on the composed config before anything
is written, so a value that would only break at render or at scoring time is refused up front.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig, OmegaConf

from render.errors import RenderError

# sqlite's INTEGER is a signed 64-bit value: a seed, a step count or any other integer the index stores
# must fit it. torch.Generator.manual_seed takes [-2**63, 2**64), so the index is the tighter bound.
INDEX_INT_MIN, INDEX_INT_MAX = -(2**63), 2**63 - 1
SEED_MAX = INDEX_INT_MAX


class LimitError(RenderError, ValueError):
    """A config value outside what rendering, the run directory or the index can hold."""


def _leaves(node: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _leaves(value, f"{path}[{i}]")
    else:
        yield path, node


def number_problem(value: Any) -> str | None:
    """Why a number cannot travel through render and the index, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    if isinstance(value, int) and not INDEX_INT_MIN <= value <= INDEX_INT_MAX:
        return f"must lie in [{INDEX_INT_MIN}, {INDEX_INT_MAX}] (a signed 64-bit integer: what the index stores)"
    return None


def check_numbers(cfg: DictConfig) -> None:
    """Every number of the task config (the `hydra` node aside) is finite and fits a 64-bit integer."""
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    container.pop("hydra", None)
    for path, value in _leaves(container, ""):
        problem = number_problem(value)
        if problem:
            raise LimitError(f"{path}={value}: {problem}")


SURELY_OPENED = 4096 * 4096  # PIL's MAX_IMAGE_PIXELS has been 89 478 485 (about 9459 x 9459) since Pillow 3.0


def check_image_size(height: int, width: int) -> None:
    """The image must be one the scorer can open: PIL refuses images over twice MAX_IMAGE_PIXELS as a
    decompression bomb (and warns over it), so a larger render could never be scored."""
    if height * width <= SURELY_OPENED:
        return  # PIL's own limit is far above: not worth importing PIL for (a preflight of every cell)
    from PIL import Image

    limit = Image.MAX_IMAGE_PIXELS
    if limit is not None and height * width > limit:
        raise LimitError(f"height={height} width={width}: {height * width} pixels, more than the {limit} that PIL "
                         "(the scorer's image reader) opens without refusing the file; render a smaller size")
