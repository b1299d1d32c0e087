"""Measure the shapes model's speed/quality trade-off with the checker, through the runner's own code.

(It lives in assess: it reads the renderer, never the other way round, and its statistics are
assess.statistics.compare'.)

A cell is composed from Hydra overrides exactly as `python -m render model=shapes ...` composes it
(`compose_job`), configured with `render.run.loader.configure` and rendered one sample at a time with
`render.run.runner.render_sample`, so images and latencies are the ones a sweep records. Quality is the
checker (render/models/shapes/checker.py); a cell is compared with the anchor sample by sample (same
prompts and seeds) with assess.statistics.compare' paired delta and its bootstrap interval.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import render
from assess.statistics.compare import Estimate, paired_delta

CONF_DIR = Path(render.__file__).resolve().parent / "conf"


@dataclass(frozen=True)
class Sample:
    prompt: str
    seed: int
    image: np.ndarray  # H x W x 3 uint8, the pixels of the runner's PNG
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


def compose_job(*overrides: str) -> Any:
    """The `render.cell.Job` that `python -m render model=shapes device=cpu <overrides>` would run."""
    from hydra import compose, initialize_config_dir

    import render.compose.schema  # noqa: F401  registers the schemas
    from render.cell import build_job

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model=shapes", "device=cpu", *overrides])
    return build_job(cfg)


def load_shipped(job: Any) -> Any:
    """The shipped weights as a `render.run.loader.LoadedPipeline`, loaded the way the runner loads models."""
    import torch

    from render.models.shapes import shapes_model_dir
    from render.run.loader import pipeline_class, quiet_libraries

    quiet_libraries()
    model = job.cell.model
    started = time.perf_counter()
    pipe = pipeline_class(model.pipeline).from_pretrained(shapes_model_dir(), dtype=getattr(torch, model.dtype))
    pipe.to(job.device)
    return as_loaded(pipe, time.perf_counter() - started)


def as_loaded(pipe: Any, load_s: float = 0.0) -> Any:
    """An in-memory pipeline as a `render.run.loader.LoadedPipeline` (what `configure` takes)."""
    from render.run.loader import LoadedPipeline

    pipe.set_progress_bar_config(disable=True)
    scheduler_config = dict(pipe.scheduler.config)
    scheduler_config.setdefault("_class_name", type(pipe.scheduler).__name__)  # set by from_pretrained only
    return LoadedPipeline(pipe, load_s, scheduler_config)


def render_job(loaded: Any, job: Any) -> list[Sample]:
    """Configure the pipeline for the job's cell and render its samples, one call each, like the runner."""
    from PIL import Image

    from render.run.loader import call_kwargs, configure
    from render.run.runner import render_sample

    texts = [p.text for p in job.prompts]

    def calibrate() -> None:  # MagCache without ratios: one full render first, as the runner does
        loaded.pipe(**call_kwargs(job.cell, texts[0], job.seeds[0]))

    configure(loaded, job.cell, calibrate)
    samples = []
    for text in texts:
        for seed in job.seeds:
            png, calls, _memory, _kind = render_sample(loaded, job, text, seed)
            samples.append(Sample(text, seed, np.asarray(Image.open(io.BytesIO(png)).convert("RGB")), calls[0]))
    return samples


def verdicts(samples: Iterable[Sample]) -> list[Any]:
    from render.models.shapes.checker import check

    return [check(s.image, s.prompt) for s in samples]


def score(samples: Iterable[Sample]) -> Score:
    found = verdicts(samples)
    if not found:
        raise ValueError("no samples to score")

    def mean(attribute: str) -> float:
        return float(np.mean([getattr(v, attribute) for v in found]))

    return Score(len(found), mean("correct"), mean("colour"), mean("shape"), mean("position"), mean("fit"))


def paired_difference(anchor: Sequence[float], cell: Sequence[float]) -> Estimate:
    """Mean of cell - anchor over samples paired in order (same prompts and seeds), with its 95 % bootstrap
    interval: assess.statistics.compare.paired_delta, each sample its own pair."""
    if len(anchor) != len(cell) or len(cell) < 2:
        raise ValueError(f"{len(anchor)} anchor and {len(cell)} cell samples: pair at least 2, one for one")
    keys = [(str(i), 0) for i in range(len(cell))]
    estimate = paired_delta(dict(zip(keys, cell, strict=True)), dict(zip(keys, anchor, strict=True)))
    assert estimate is not None  # at least two pairs
    return estimate
