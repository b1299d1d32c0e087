"""A clip sample's file: one lossless animated PNG (APNG) that browsers play in an <img> and Pillow reads.

Pillow's APNG writer merges identical consecutive frames into one frame of the summed duration (and writes a
still PNG when every frame is the same) unless their blend ops differ: the writer alternates SOURCE and OVER,
the same pixels for opaque frames, so the file holds every frame rendered. The reader still expands a stored
frame by its duration over the clip's frame period (a file another writer merged) and checks the count against
the one recorded (`SampleRecord.frames`): it returns exactly the frames rendered, or raises.
Frames are read in chunks: a long clip is never held decoded whole (assess.metrics.frames streams them).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from render.errors import RenderError

if TYPE_CHECKING:
    import numpy as np

CHUNK = 8  # frames decoded at once when a clip is read


class ClipError(RenderError, OSError):
    """A clip file that does not hold the frames its record says (truncated, foreign, or another rate)."""


def clip_bytes(frames: np.ndarray, fps: int) -> bytes:
    """APNG bytes of frames x height x width x 3 uint8 frames at `fps`, looping."""
    from PIL import Image, PngImagePlugin

    first, *rest = (Image.fromarray(frame) for frame in frames)
    ops = (PngImagePlugin.Blend.OP_SOURCE, PngImagePlugin.Blend.OP_OVER)  # never two alike in a row: no merge
    buffer = io.BytesIO()
    first.save(buffer, format="PNG", save_all=True, append_images=rest, duration=1000 / fps, loop=0,
               blend=[ops[i % 2] for i in range(len(frames))], default_image=False)
    return buffer.getvalue()


def iter_frames(path: Path, frames: int, fps: int, chunk: int = CHUNK) -> Iterator[np.ndarray]:
    """The clip's frames, `chunk` at a time (each array: n x height x width x 3 uint8), exactly `frames` in all.
    ClipError when the file holds another count (the merged frames expanded) or cannot be decoded."""
    import numpy as np
    from PIL import Image, ImageSequence

    period = 1000 / fps
    batch: list[np.ndarray] = []
    seen = 0
    try:
        with Image.open(path) as clip:
            for stored in ImageSequence.Iterator(clip):
                repeats = max(1, round(float(stored.info.get("duration", period)) / period))
                pixels = np.asarray(stored.convert("RGB"))
                for _ in range(repeats):
                    seen += 1
                    if seen > frames:
                        raise ClipError(f"{path}: holds more than the {frames} frames its record says (at {fps} fps)")
                    batch.append(pixels)
                    if len(batch) == chunk:
                        yield np.stack(batch)
                        batch = []
    except (SyntaxError, ValueError, EOFError) as error:  # PIL reports some broken chunks this way
        raise ClipError(f"{path}: {error}") from error
    if seen != frames:
        raise ClipError(f"{path}: holds {seen} frames at {fps} fps; its record says {frames}")
    if batch:
        yield np.stack(batch)


def read_frames(path: Path, frames: int, fps: int) -> np.ndarray:
    """Every frame at once (a short clip's round trip, a strip): frames x height x width x 3 uint8."""
    import numpy as np

    return np.concatenate(list(iter_frames(path, frames, fps)))


def strip_indices(frames: int, n: int = 6) -> list[int]:
    """`n` frames spread over the clip, first and last included (the report's frame strip)."""
    if frames <= n:
        return list(range(frames))
    return sorted({round(i * (frames - 1) / (n - 1)) for i in range(n)})
