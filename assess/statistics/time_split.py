"""Where a cell's time goes, and the speed-up a denoiser lever cannot give because another stage dominates.

A cell's split is the median over its warm samples of each stage's seconds as the renderer recorded them
(render.run.stage_clock: text encoding, the denoising loop, the VAE decode). Read from sample rows by column name
(the index's `samples` rows or SampleRecord.as_dict()); a sample recorded before the split existed has none, and a
cell without any is shown as "—".

The bound is Amdahl's law on the anchor's split: when the denoiser is a share p of the anchor's sample and a cell's
denoising is d times faster, the sample can be at most 1 / ((1 - p) + p / d) times faster, and no denoiser lever
(a cache, fewer steps, faster attention, compile of the transformer) can pass 1 / (1 - p). Said in words when the
stages the lever does not touch take a fifth or more of what its denoising speed-up would give (docs/timing.md).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

BOUND = "no denoiser lever can pass"  # the words of a bound note (the report marks the note)
NO_SPLIT = "—"  # a cell whose samples were recorded before the split existed
NOTE_LOSS = 0.8  # the words are said when the sample's bound is below this share of the denoiser's own speed-up
NOTE_MIN_DENOISE_X = 1.1  # ... and the cell's denoising is at least this much faster than the anchor's


@dataclass(frozen=True)
class CellStages:
    """A cell's median seconds per stage over its warm samples that carry a split (n of them)."""

    text_s: float
    denoise_s: float
    vae_s: float
    n: int

    @property
    def total_s(self) -> float:
        return self.text_s + self.denoise_s + self.vae_s

    def share(self, stage: str) -> float:
        total = self.total_s
        return getattr(self, f"{stage}_s") / total if total > 0 else 0.0

    def text(self) -> str:
        """"text 5 % · denoise 40 % · VAE 55 %"."""
        return (f"text {self.share('text'):.0%} · denoise {self.share('denoise'):.0%} · "
                f"VAE {self.share('vae'):.0%}").replace("%", " %")

    def seconds(self) -> str:
        """"text 0.12 s · denoise 3.4 s · VAE 1.1 s (median of 12 warm samples)"."""
        return (f"text {self.text_s:.3g} s · denoise {self.denoise_s:.3g} s · VAE {self.vae_s:.3g} s "
                f"(median of {self.n} warm sample{'s' if self.n != 1 else ''})")


def cell_stages(samples: Iterable[Mapping[str, Any]]) -> CellStages | None:
    """The cell's split over its warm samples rendered with one (None: no sample carries it)."""
    timed = [s for s in samples if not s["warmup"] and s["denoise_s"] is not None]
    if not timed:
        return None
    def median(stage: str) -> float:
        return float(statistics.median(float(s[f"{stage}_s"] or 0.0) for s in timed))

    return CellStages(text_s=median("text"), denoise_s=median("denoise"), vae_s=median("vae"), n=len(timed))


def stage_text(stages: CellStages | None) -> str:
    """The leaderboard's split cell: the shares, or "—" for a cell recorded before the split existed."""
    return NO_SPLIT if stages is None else stages.text()


def denoiser_bound(anchor: CellStages, cell: CellStages) -> tuple[float, float, float, float] | None:
    """(denoiser share p of the anchor's sample, the cell's denoising speed-up d, the sample's bound for that d,
    the ceiling of any denoiser lever); None when the anchor's denoising or the cell's took no time."""
    if anchor.total_s <= 0 or anchor.denoise_s <= 0 or cell.denoise_s <= 0:
        return None
    p = anchor.share("denoise")
    d = anchor.denoise_s / cell.denoise_s
    bound = 1.0 / ((1.0 - p) + p / d)
    ceiling = float("inf") if p >= 1.0 else 1.0 / (1.0 - p)
    return p, d, bound, ceiling


def bound_note(anchor: CellStages | None, cell: CellStages | None) -> str | None:
    """The speed-up this cell's lever could not give because another stage dominates, in words; None when no stage
    but the denoiser matters, the cell's denoising is not faster, or either split is missing."""
    if anchor is None or cell is None:
        return None
    found = denoiser_bound(anchor, cell)
    if found is None:
        return None
    p, d, bound, ceiling = found
    if d < NOTE_MIN_DENOISE_X or bound >= NOTE_LOSS * d:
        return None
    others = f"text encoding {anchor.share('text'):.0%}, VAE decode {anchor.share('vae'):.0%}"
    return (f"the denoiser is {p:.0%} of the anchor's sample: this cell's denoising, {d:.2f}x faster, can give at most "
            f"{bound:.2f}x; {BOUND} {ceiling:.2f}x here ({others})").replace("%", " %")
