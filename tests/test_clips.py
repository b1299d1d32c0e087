"""A clip's file (render.run.apng): the reader returns exactly the frames written, identical consecutive frames
included (Pillow's APNG writer merges them), chunk by chunk; a file of another count is refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from render.run.apng import ClipError, clip_bytes, iter_frames, read_frames, strip_indices
from render.rundir import SampleRecord


def _clip(pattern: list[int]) -> np.ndarray:
    """Frames whose pixels are each pattern value: equal values in a row are identical frames."""
    return np.stack([np.full((8, 12, 3), v, dtype=np.uint8) for v in pattern])


@pytest.mark.parametrize("pattern", [[0, 0, 0, 0, 0], [10, 20, 20, 20], [5, 5, 9, 9, 9, 9, 9, 9, 9, 1, 1]],
                         ids=["all-identical", "trailing-identical", "runs"])
@pytest.mark.parametrize("fps", [16, 24, 7])
def test_identical_frames_round_trip_to_the_recorded_count(pattern: list[int], fps: int, tmp_path: Path) -> None:
    frames = _clip(pattern)
    path = tmp_path / "clip.png"
    path.write_bytes(clip_bytes(frames, fps))
    back = read_frames(path, len(pattern), fps)
    assert back.shape == frames.shape and np.array_equal(back, frames)


def test_frames_are_read_in_chunks(tmp_path: Path) -> None:
    frames = _clip(list(range(0, 200, 10)))  # 20 distinct frames
    path = tmp_path / "clip.png"
    path.write_bytes(clip_bytes(frames, 16))
    sizes = [len(chunk) for chunk in iter_frames(path, 20, 16, chunk=8)]
    assert sizes == [8, 8, 4]


def test_a_clip_holding_another_count_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "clip.png"
    path.write_bytes(clip_bytes(_clip([1, 2, 3]), 16))
    with pytest.raises(ClipError, match="holds 3 frames at 16 fps; its record says 5"):
        read_frames(path, 5, 16)
    with pytest.raises(ClipError, match="more than the 2 frames"):
        read_frames(path, 2, 16)


def test_the_strip_spreads_over_the_clip() -> None:
    assert strip_indices(81) == [0, 16, 32, 48, 64, 80]
    assert strip_indices(4) == [0, 1, 2, 3]


def test_a_file_whose_writer_merged_identical_frames_reads_back_whole(tmp_path: Path) -> None:
    from PIL import Image

    frames = _clip([10, 20, 20, 20, 30, 30])
    path = tmp_path / "merged.png"
    first, *rest = (Image.fromarray(f) for f in frames)
    first.save(path, format="PNG", save_all=True, append_images=rest, duration=1000 / 16, loop=0)  # Pillow merges
    with Image.open(path) as stored:
        assert stored.n_frames == 3
    assert np.array_equal(read_frames(path, 6, 16), frames)


def _record(frames: int) -> SampleRecord:
    return SampleRecord(cell_key="k", prompt_id="p", seed=0, prompt="a clip", image="images/p__s0.png", width=12,
                        height=8, latency_s=1.0, warmup=False, steps=4, s_per_step=0.25, peak_mem_bytes=None,
                        mem_kind=None, load_s=None, reused_from=None, finished_at=None, frames=frames, fps=16)


def test_a_clip_is_scored_against_its_anchors_frames_and_refused_against_another_count(tmp_path: Path) -> None:
    from assess.metrics.frames import score_clip
    from assess.metrics.fidelity import PSNRMetric

    clip, anchor, short = tmp_path / "clip.png", tmp_path / "anchor.png", tmp_path / "short.png"
    clip.write_bytes(clip_bytes(_clip([10, 10, 40, 40, 40, 90, 90, 90, 90]), 16))
    anchor.write_bytes(clip_bytes(_clip([12] * 9), 16))
    short.write_bytes(clip_bytes(_clip([12] * 5), 16))
    (psnr,) = score_clip(clip, _record(9), [PSNRMetric()], (anchor, _record(9)), None).values()
    detail = json.loads(psnr.detail or "")
    assert detail["frames"] == 9 and detail["worst_frame"] in (5, 6, 7, 8)  # the frames furthest from the anchor's
    assert psnr.value == pytest.approx(sum(detail["per_frame"]) / 9, abs=1e-4)
    (refused,) = score_clip(clip, _record(9), [PSNRMetric()], (short, _record(5)), None).values()
    assert "the anchor's clip has 5 frames, this sample 9: not comparable" in (refused.unavailable_reason or "")
