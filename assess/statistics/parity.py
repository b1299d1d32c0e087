"""Parity against one GPU: a parallel cell's samples against its width-1 twin's (docs/parallel.md).

A cell with a `parallel` value (render.axes.parallel) renders its twin alongside (render.run.runner): the same cell
with `parallel` left out of its key. `assess score` compares each of the cell's samples with the twin's sample of
the same text and seed on two pixel drift figures, the largest pixel difference (8-bit levels) and SSIM, kept in
the index's `parity` table. A cell whose worst sample is outside the band is flagged `parallel-drift`: the climb
never crowns it. Parallelism only reorders floating-point sums, so anything past rounding is a bug (ring attention
was found at SSIM 0.894, sglang#33327).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from render.rundir import RunDir, SampleRecord
from render.rundir.records import twin_key as twin_key  # the twin's key: render.rundir, which finds its folders
from render.rundir.untrusted import contained

MAX_LEVELS = 2  # the band: at most 2 of 255 levels apart in any pixel ...
MIN_SSIM = 0.999  # ... and SSIM at least this, on every sample (Ulysses on the CPU: 1 level, SSIM 1.0)


def drift(image: Any, twin: Any) -> tuple[int, float | None, str | None]:
    """(largest pixel difference in 8-bit levels, SSIM against the twin, why SSIM is unavailable)."""
    import numpy as np

    from assess.metrics import SampleInput
    from assess.metrics.fidelity import SSIMMetric

    if image.shape != twin.shape:
        raise ValueError(f"image is {image.shape[1]}x{image.shape[0]}, its twin's {twin.shape[1]}x{twin.shape[0]}")
    levels = int(np.abs(image.astype(np.int16) - twin.astype(np.int16)).max())
    (outcome,) = SSIMMetric().score([SampleInput("", 0, image, None, reference=twin)])
    return levels, outcome.value, outcome.unavailable_reason


def clip_drift(path: Path, sample: SampleRecord, twin_path: Path, twin: Any) -> tuple[int, float | None, str | None]:
    """A clip's drift against its twin's clip, frame by frame (streamed, render.run.apng.CHUNK frames at a time): the
    largest pixel difference over every frame and the lowest frame SSIM, so one bad frame is not averaged away."""
    from render.run.apng import iter_frames  # a broken clip raises ClipError, an OSError: its parity row says why

    if twin["frames"] != sample.frames:
        raise ValueError(f"the twin's clip has {twin['frames']} frames, this sample {sample.frames}")
    assert sample.frames is not None and sample.fps is not None
    worst_levels, worst_ssim, why = 0, None, None
    for chunk, twin_chunk in zip(iter_frames(path, sample.frames, sample.fps),
                                 iter_frames(twin_path, twin["frames"], twin["fps"])):
        for frame, twin_frame in zip(chunk, twin_chunk):
            levels, ssim, why = drift(frame, twin_frame)
            worst_levels = max(worst_levels, levels)
            if ssim is not None and (worst_ssim is None or ssim < worst_ssim):
                worst_ssim = ssim
    return worst_levels, worst_ssim, None if worst_ssim is not None else why


def outside_band(levels: int | None, ssim: float | None) -> str | None:
    """Why a sample's drift is outside the band, or None when it is inside."""
    if levels is not None and levels > MAX_LEVELS:
        return f"{levels} levels apart (band: {MAX_LEVELS})"
    if ssim is not None and ssim < MIN_SSIM:
        return f"SSIM {ssim:.4f} (band: {MIN_SSIM})"
    return None


def parity_rows(run: RunDir, twin_samples: Mapping[tuple[str, int], Any], read: Callable[[Path], Any],
                done: Collection[tuple[str, int]] = ()) -> list[dict[str, Any]]:
    """One `parity` row per sample of a parallel run: its drift against the twin's sample, or why there is none.
    `twin_samples`: the twin cell's sample rows by (text identity, seed) (Index.cell_samples); `done`: samples
    whose drift is already indexed (stored_parity), not read again."""
    key = run.twin_key
    if key is None:
        return []
    rows = []
    for sample in run.samples:
        if (sample.text_id, sample.seed) in done:
            continue
        row: dict[str, Any] = {"cell_key": run.cell_key, "prompt_sha": sample.text_id, "seed": sample.seed,
                               "twin_cell_key": key, "max_levels": None, "ssim": None, "unavailable_reason": None}
        try:
            row["max_levels"], row["ssim"], row["unavailable_reason"] = _compare(run, sample, twin_samples, read)
        except (OSError, ValueError) as error:
            row["unavailable_reason"] = str(error)
        rows.append(row)
    return rows


def _compare(run: RunDir, sample: SampleRecord, twin_samples: Mapping[tuple[str, int], Any],
             read: Callable[[Path], Any]) -> tuple[int | None, float | None, str | None]:
    twin = twin_samples.get((sample.text_id, sample.seed))
    if twin is None:
        return None, None, (f"twin sample missing (cell {run.twin_key}, prompt {sample.prompt_id}, seed "
                            f"{sample.seed}): re-run the parallel cell, which renders it")
    twin_path = contained(twin["run_path"], twin["image"], "twin image")
    if sample.frames:
        return clip_drift(run.image_path(sample), sample, twin_path, twin)
    return drift(read(run.image_path(sample)), read(twin_path))


def stored_parity(rows: Sequence[Any], twin: str | None) -> set[tuple[str, int]]:
    """The samples whose drift against `twin` is indexed with both figures (Index.parity rows): a sample and its
    twin's are rendered once and never change, so scoring again need not read them again (--force does)."""
    return {(r["prompt_sha"], r["seed"]) for r in rows if r["twin_cell_key"] == twin and r["max_levels"] is not None
            and r["ssim"] is not None and r["unavailable_reason"] is None}


def drifting(rows: Sequence[Any]) -> str | None:
    """The `parallel-drift` flag of one cell from its `parity` rows: how many samples are outside the band and the
    worst one's reason, or None when none is."""
    bad = [(r, why) for r in rows if (why := outside_band(r["max_levels"], r["ssim"]))]
    if not bad:
        return None
    worst, why = max(bad, key=lambda b: (b[0]["max_levels"] or 0, -(b[0]["ssim"] if b[0]["ssim"] is not None else 1.0)))
    return (f"parallel-drift: {len(bad)} of {len(rows)} sample(s) outside the band against the single-call twin (width 1, batch 1) "
            f"{worst['twin_cell_key']}; the worst is {why}")


def parity_note(rows: Sequence[Any], floor: str | None = None) -> str | None:
    """The report's line for a parallel cell: its `parallel-drift` flag, or its worst figures inside the band; with
    the lossless floor beside them (`floor`: floor_beside)."""
    compared = [r for r in rows if r["max_levels"] is not None]
    if not rows:
        return None
    tail = f"; {floor}" if floor else ""
    flag = drifting(compared)
    if flag or not compared:
        return (flag or f"parity with its single-call twin: not compared ({rows[0]['unavailable_reason']})") + tail
    ssims = [r["ssim"] for r in compared if r["ssim"] is not None]
    return (f"parity with its single-call twin {compared[0]['twin_cell_key']}: {len(compared)} sample(s), at most "
            f"{max(r['max_levels'] for r in compared)} level(s) apart"
            + (f", SSIM at least {min(ssims):.4f} (1 - SSIM {1 - min(ssims):.2g})" if ssims else "")
            + f" (band: {MAX_LEVELS} levels, SSIM {MIN_SSIM})" + tail)


def floor_beside(index: Any, cell_key: str) -> str | None:
    """The lossless floor of the cell's anchor on SSIM (assess.statistics.floor: how far renders that change no mathematics
    drift from the anchor, as 1 - SSIM), to read a parallel cell's drift against; None for a cell without parity
    rows or an anchor in the index."""
    from assess.statistics.floor import measure

    if not index.parity(cell_key):
        return None
    anchor = index.query("SELECT anchor_cell_key FROM runs WHERE cell_key = ? AND anchor_cell_key IS NOT NULL LIMIT 1",
                         (cell_key,))
    if not anchor:
        return None
    floor = measure(index, anchor[0]["anchor_cell_key"], ["ssim"]).get("ssim")
    if floor is None:
        return "lossless floor: not measured (a lossless sibling of the anchor scored on ssim: `assess floor`)"
    high = f" (95 % up to {floor.high:.2g})" if floor.high is not None else ""
    return f"lossless floor: 1 - SSIM {floor.value:.2g}{high} on {floor.sibling} against the anchor, {floor.n} prompt(s)"
