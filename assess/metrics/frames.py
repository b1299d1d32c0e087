"""Scores of a clip sample: every sample metric over its frames, streamed (render.run.apng.CHUNK frames decoded at
once, the anchor's beside them), reduced to one score per metric.

A metric scores each frame as it would an image (fidelity against the anchor's frame of the same index, prompt
alignment against the prompt: every frame, none sampled away); the clip's value is the mean over its frames and
the detail holds the frame count, the worst frame and each frame's value. `temporal_ssim` scores each frame
against the one before it (frames 2..N). A frame that cannot be scored makes the clip's score unavailable with
its reason: a clip is one sample.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assess.metrics import Outcome, SampleInput, SampleMetric
from render.run.apng import ClipError, iter_frames
from render.rundir import SampleRecord

if TYPE_CHECKING:
    import numpy as np


def clip_outcome(metric: SampleMetric, outcomes: list[Outcome]) -> Outcome:
    """The clip's score from its frames' (in order, from the metric's first frame)."""
    bad = next((o for o in outcomes if not o.available), None)
    if bad is not None:
        return Outcome.unavailable(f"{bad.unavailable_reason} (a frame of the clip)")
    if not outcomes:
        return Outcome.unavailable(f"the clip has no frame from frame {metric.first_frame + 1} on to score")
    values = [float(o.value) for o in outcomes if o.value is not None]
    pick = min if metric.spec.direction == "higher" else max
    worst = pick(range(len(values)), key=values.__getitem__)
    detail = {"frames": len(values), "mean": "over frames", "first_frame": metric.first_frame,
              "worst_frame": worst + metric.first_frame, "worst": round(values[worst], 6), "per_frame": [round(v, 6) for v in values]}
    return Outcome.of(sum(values) / len(values), detail=json.dumps(detail))


def _anchor_chunks(anchor: tuple[Path, SampleRecord] | None, sample: SampleRecord
                   ) -> tuple[Iterator[np.ndarray] | None, str | None]:
    """The anchor's frames in the sample's chunks, or why there are none to compare with."""
    if anchor is None:
        return None, None
    path, record = anchor
    if record.frames != sample.frames:
        return None, (f"the anchor's clip has {record.frames} frames, this sample {sample.frames}: not comparable "
                      "(render both at the same model.num_frames)")
    assert record.frames is not None and record.fps is not None
    return iter_frames(path, record.frames, record.fps), None


def score_clip(path: Path, sample: SampleRecord, metrics: list[SampleMetric],
               anchor: tuple[Path, SampleRecord] | None, missing: str | None) -> dict[str, Outcome]:
    """Each metric's outcome for one clip; `anchor` is its anchor sample's file and record (None: `missing` says why).
    A clip file (this one or the anchor's) that cannot be read makes every outcome unavailable, with its reason."""
    assert sample.frames is not None and sample.fps is not None
    per_frame: dict[str, list[Outcome]] = {m.spec.name: [] for m in metrics}
    try:
        references, problem = _anchor_chunks(anchor, sample)
        missing = problem or missing
        previous: Any = None
        start = 0
        for chunk in iter_frames(path, sample.frames, sample.fps):
            reference = next(references) if references is not None else None
            inputs = [SampleInput(prompt_id=sample.prompt_id, seed=sample.seed, image=frame, prompt=sample.prompt,
                                  reference=None if reference is None else reference[i], reference_missing=missing,
                                  previous=chunk[i - 1] if i else previous) for i, frame in enumerate(chunk)]
            for metric in metrics:
                scored = inputs[max(0, metric.first_frame - start):]
                if scored:
                    per_frame[metric.spec.name] += metric.score(scored)
            previous, start = chunk[-1], start + len(chunk)
    except (ClipError, OSError) as error:
        return {m.spec.name: Outcome.unavailable(f"image unreadable: {error}") for m in metrics}
    return {m.spec.name: clip_outcome(m, per_frame[m.spec.name]) for m in metrics}
