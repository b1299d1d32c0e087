"""Build diffusers pipelines, keep them loaded for the whole process, configure them per cell.

A sweep run in one process loads each model once: `PipelineCache.get` returns the loaded pipeline
and `configure` resets attention backend, cache hooks and scheduler before applying the cell's own,
so a cell's images are the same whether it ran after another cell or alone.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from render import axes
from render.attention import apply_attention, reset_attention
from render.caches import apply_cache, reset_cache
from render.cell import Cell, ModelSpec
from render.loading import BUILTIN_PREFIX, model_source, pipeline_class, quiet_libraries  # noqa: F401 (re-exported)
from render.schedulers import apply_scheduler

log = logging.getLogger("render")


@dataclass
class LoadedPipeline:
    pipe: Any
    load_s: float
    scheduler_config: dict[str, Any]
    fresh: bool = True  # nothing rendered with it yet: the next sample is a warm-up
    load_unrecorded: bool = True  # its load time is not yet on a sample record (the budget counts it once)
    configured_for: str | None = None  # cell key it is configured for
    cache_record: dict[str, Any] = field(default_factory=dict)
    weights_bytes: int = 0  # weights footprint as loaded (after quantization / layerwise casting)
    warmups_left: int = 0  # calls still to mark as warm-up for the configured cell
    device: str = "cpu"  # where the pipeline was loaded (offload undo moves it back here)


class PipelineCache:
    """One loaded pipeline per (model, dtype, device, load-time options) for the life of the process.

    `load` is `render.axes.load_options(cell)`: quantization and layerwise casting change the weights
    themselves, so a cell with other load-time options gets its own load (never a modified copy)."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, str | None, str, str, str, str], LoadedPipeline] = {}

    def get(self, model: ModelSpec, device: str, load: str = "") -> LoadedPipeline:
        key = (model.id, model.revision, model.pipeline, model.dtype, device, load)
        if key not in self._loaded:
            # Models differ between cells: free the old one before loading the next.
            self._loaded.clear()
            self._loaded[key] = load_pipeline(model, device, load)
        return self._loaded[key]


# Process-level: an in-process sweep (and preflight's timing of a sample) loads each model once.
PIPELINES = PipelineCache()


def load_pipeline(model: ModelSpec, device: str, load: str = "") -> LoadedPipeline:
    import torch

    quiet_libraries()
    source = model_source(model)
    start = time.perf_counter()
    cls = pipeline_class(model.pipeline)
    dtype = getattr(torch, model.dtype)
    pipe = cls.from_pretrained(source, revision=model.revision, dtype=dtype,
                               quantization_config=axes.quantization_config(load, source, dtype))
    axes.apply_load_time(pipe, denoiser(pipe), load, dtype)
    pipe.to(device)
    pipe.set_progress_bar_config(disable=True)
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    load_s = time.perf_counter() - start
    log.info("loaded model %s (%s, %s%s) on %s in %.2f s", model.name, source, model.dtype, f", {load}" if load else "", device, load_s)
    return LoadedPipeline(pipe, load_s, dict(pipe.scheduler.config), weights_bytes=axes.weights_bytes(pipe), device=device)


def denoiser(pipe: Any) -> Any:
    return getattr(pipe, "transformer", None) or pipe.unet


def configure(loaded: LoadedPipeline, cell: Cell, cache_conf: Any, calibrate: Any, record_in: Path | None = None) -> None:
    """Reset the pipeline to its loaded state, then apply the cell's attention, scheduler, toggles,
    offload, cache and (last, so it traces the hooks) compile.

    `record_in`: the cell's run.json, which gets what the cache derived (`cache_record`: MagCache's
    ratios in use and whether they were given or calibrated, FasterCache's is_guidance_distilled).
    """
    pipe = loaded.pipe
    if loaded.configured_for != cell.key:
        model = denoiser(pipe)
        axes.reset_axes(pipe, model, loaded.device)
        reset_cache(pipe)
        reset_attention(model)
        apply_scheduler(pipe, cell.scheduler, cell.model.family, loaded.scheduler_config)
        apply_attention(model, cell.attention)
        axes.configure_axes(pipe, model, cell, loaded.device)
        loaded.cache_record = apply_cache(pipe, cache_conf, steps=cell.steps, calibrate=calibrate) or {}
        axes.apply_compile_axis(model, cell)
        loaded.configured_for = cell.key
        loaded.fresh = True
    if record_in is not None:
        record_cache(record_in, loaded.cache_record)


def record_cache(run_json: Path, cache_record: dict[str, Any]) -> None:
    """Add `cache_record` to a run.json already written (atomically, like every run-directory write)."""
    from render.rundir import atomic_write_json

    atomic_write_json(run_json, {**json.loads(run_json.read_text()), "cache_record": cache_record})


def call_kwargs(cell: Cell, prompt: str, seed: int) -> dict[str, Any]:
    """The pipeline call for one sample: the same arguments a bare diffusers script would pass."""
    import torch

    kwargs: dict[str, Any] = {
        "prompt": prompt,
        "num_inference_steps": cell.steps,
        "guidance_scale": cell.guidance,
        "height": cell.height,
        "width": cell.width,
        "generator": torch.Generator("cpu").manual_seed(seed),
        "output_type": "np",
    }
    if cell.model.max_sequence_length is not None:
        kwargs["max_sequence_length"] = cell.model.max_sequence_length
    return kwargs
