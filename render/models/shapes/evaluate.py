"""Render (prompt, seed) samples with a shapes pipeline one at a time, as the runner does, and check them.

Each sample is one pipeline call with the runner's arguments (render/pipeline.py: call_kwargs):
a CPU generator seeded with the sample's seed and output_type "np", so these images equal the
ones `python -m render model=shapes` writes for the same cell.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Sample:
    prompt: str
    seed: int
    image: np.ndarray  # H x W x 3 uint8, as the runner's PNG holds it
    latency_s: float


@dataclass(frozen=True)
class Score:
    n: int
    correct: float  # fraction with colour, shape and position all right
    colour: float
    shape: float
    position: float
    fit: float  # mean soft IoU with the asked shape

    def line(self) -> str:
        return (f"n={self.n} overall {self.correct:.1%} colour {self.colour:.1%} shape {self.shape:.1%} "
                f"position {self.position:.1%} fit {self.fit:.3f}")


def render_samples(pipe: Any, prompts: Iterable[str], seeds: Iterable[int], *, steps: int, guidance: float,
                   height: int = 32, width: int = 32) -> list[Sample]:
    import torch

    samples = []
    for prompt in prompts:
        for seed in seeds:
            started = time.perf_counter()
            with torch.inference_mode():
                pixels = pipe(prompt=prompt, num_inference_steps=steps, guidance_scale=guidance, height=height,
                              width=width, generator=torch.Generator("cpu").manual_seed(seed), output_type="np").images[0]
            latency = time.perf_counter() - started
            image = (np.clip(pixels, 0, 1) * 255).round().astype(np.uint8)
            samples.append(Sample(prompt, seed, image, latency))
    return samples


def score(samples: Iterable[Sample]) -> Score:
    from assess.metrics.shapes import check

    verdicts = [check(s.image, s.prompt) for s in samples]
    if not verdicts:
        raise ValueError("no samples to score")
    mean = lambda values: float(np.mean(values))  # noqa: E731
    return Score(len(verdicts), mean([v.correct for v in verdicts]), mean([v.colour for v in verdicts]),
                 mean([v.shape for v in verdicts]), mean([v.position for v in verdicts]), mean([v.fit for v in verdicts]))
