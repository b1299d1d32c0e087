"""Build diffusers pipelines, keep them loaded for the whole process, configure them per cell.

A sweep run in one process loads each model once: `PipelineCache.get` returns the loaded pipeline
and `configure` undoes every axis a previous cell applied before applying the cell's own
(render.axes.configure), so a cell's images are the same whether it ran after another cell or alone.
"""

from __future__ import annotations

import gc
import json
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import Any

from render import axes
from render.errors import RenderError
from render.axes.quant import weights_bytes
from render.compose.introspect import pipeline_class, quiet_libraries
from render.compose.spec import Cell, ModelSpec
from render.run.stage_clock import StageSplit

log = logging.getLogger("render")
BUILTIN_PREFIX = "hypergrid:"


class ModelUnavailable(RenderError, ValueError):
    """A model id that names no model the project can build."""


def builtin_models() -> dict[str, Any]:
    """Models the project builds itself: name -> function returning the saved folder (the shipped shapes
    model, and each family's tiny twin, built on first use)."""
    from render.models.families import twins
    from render.models.shapes import shapes_model_dir

    return {**{name: twin.ensure for name, twin in twins().items()}, "shapes": shapes_model_dir}


def builtin_folder(model_id: str) -> Path:
    """The folder of a built-in model (`hypergrid:<name>`), built first when it is not there yet."""
    name = model_id[len(BUILTIN_PREFIX):]
    builders = builtin_models()
    if name not in builders:
        raise ModelUnavailable(f"model.id={model_id}: no built-in model {name!r}; built-in: {', '.join(BUILTIN_PREFIX + n for n in builders)}")
    return Path(builders[name]())


def model_source(model: ModelSpec) -> str:
    """The folder or hub id that from_pretrained loads."""
    if model.id.startswith(BUILTIN_PREFIX):
        return str(builtin_folder(model.id))
    return str(Path(model.id).expanduser()) if model.id.startswith((".", "/", "~")) else model.id


@dataclass
class LoadedPipeline:
    pipe: Any
    load_s: float
    scheduler_config: dict[str, Any]
    fresh: bool = True  # nothing rendered with it yet: the next sample is a warm-up
    load_unrecorded: bool = True  # its load time is not yet on a sample record (the budget counts it once)
    load_spent: bool = False  # its load time is in an experiment's spend log (render.laws.spend), once
    configured_for: str | None = None  # cell key it is configured for
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # what each axis' apply derived, by axis
    weights_bytes: int = 0  # weights footprint as loaded (after quantization / layerwise casting)
    warmups_left: int = 0  # calls still to mark as warm-up for the configured cell
    device: str = "cpu"  # where the pipeline was loaded (offload undo moves it back here)
    stages: StageSplit | None = None  # its last call's seconds per stage (render.run.stage_clock), read after each call


class PipelineCache:
    """One loaded pipeline per (model, dtype, device, load-time options) for the life of the process.

    `load` is `render.axes.load_options(cell)`: quantization and layerwise casting change the weights
    themselves, so a cell with other load-time options gets its own load (never a modified copy)."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, str | None, str, str, str, str], LoadedPipeline] = {}

    def get(self, model: ModelSpec, device: str, load: str = "") -> LoadedPipeline:
        key = (model.id, model.revision, model.pipeline, model.dtype, device, load)
        if key not in self._loaded:
            self.clear()  # models differ between cells: free the old one before loading the next
            self._loaded[key] = load_pipeline(model, device, load)
        return self._loaded[key]

    def clear(self) -> None:
        """Forget every loaded pipeline (a parallel cell's: its mesh ends with its ranks) and free its memory.
        The collector runs first: torchao's quantized modules hold themselves in a cycle (their `extra_repr` is
        bound to the module), so without it a quantized pipeline stays on the GPU beside the next load, inflating
        that cell's peak memory or running it out of memory."""
        if not self._loaded:
            return
        self._loaded.clear()
        gc.collect()
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.empty_cache()


# Process-level: an in-process sweep (and preflight's timing of a sample) loads each model once.
PIPELINES = PipelineCache()


def load_pipeline(model: ModelSpec, device: str, load: str = "") -> LoadedPipeline:
    import torch

    quiet_libraries()
    source = model_source(model)
    start = time.perf_counter()
    cls = pipeline_class(model.pipeline)
    dtype = getattr(torch, model.dtype)
    pipe = cls.from_pretrained(source, revision=model.revision, dtype=dtype, **axes.load_kwargs(load, source, dtype))
    axes.after_load(pipe, denoiser(pipe), load, dtype)
    pipe.to(device)
    pipe.set_progress_bar_config(disable=True)
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    load_s = time.perf_counter() - start
    log.info("loaded model %s (%s, %s%s) on %s in %.2f s", model.name, source, model.dtype, f", {load}" if load else "", device, load_s)
    return LoadedPipeline(pipe, load_s, dict(pipe.scheduler.config), weights_bytes=weights_bytes(pipe), device=device)


def denoiser(pipe: Any) -> Any:
    return getattr(pipe, "transformer", None) or pipe.unet


def configure(loaded: LoadedPipeline, cell: Cell, calibrate: Any, record_in: Path | None = None) -> None:
    """Reset the pipeline to its loaded state, then apply the cell's axes (render.axes.AXES, in order:
    the cache hooks before compile, so it traces them).

    `record_in`: the cell's run.json, which gets what each axis derived (`cache_record`: MagCache's
    ratios in use and whether they were given or calibrated, FasterCache's is_guidance_distilled).
    """
    pipe = loaded.pipe
    if loaded.configured_for != cell.key:
        target = axes.Target(pipe, denoiser(pipe), loaded.device, steps=cell.steps, calibrate=calibrate,
                             family=cell.model.family, scheduler_config=loaded.scheduler_config)
        loaded.records = axes.configure(target, cell)
        loaded.configured_for = cell.key
        loaded.fresh = True
    if record_in is not None:
        record_axes(record_in, loaded.records)


def record_axes(run_json: Path, records: dict[str, dict[str, Any]]) -> None:
    """Add each axis' record to a run.json already written (`<axis>_record`; the cache's always, even empty),
    atomically like every run-directory write."""
    from render.rundir import atomic_write_json

    fields = {f"{name}_record": record for name, record in {"cache": {}, **records}.items()}
    atomic_write_json(run_json, {**json.loads(run_json.read_text()), **fields})


def call_kwargs(cell: Cell, prompt: str, seed: int) -> dict[str, Any]:
    """The pipeline call for one sample: the same arguments a bare diffusers script would pass."""
    import torch

    from render.models.families import family

    kwargs: dict[str, Any] = {
        "prompt": prompt,
        "num_inference_steps": cell.steps,
        **family(cell.model.family).guidance(cell.guidance),  # guidance_scale, or the family's own way (Qwen-Image: true CFG)
        "height": cell.height,
        "width": cell.width,
        "generator": torch.Generator("cpu").manual_seed(seed),
        "output_type": "np",
    }
    if cell.model.max_sequence_length is not None:
        kwargs["max_sequence_length"] = cell.model.max_sequence_length
    if cell.model.num_frames is not None:  # a clip family (render.models.families.check_frames)
        kwargs["num_frames"] = cell.model.num_frames
    return kwargs


def batch_kwargs(cell: Cell, prompts: Sequence[str], seeds: Sequence[int]) -> dict[str, Any]:
    """The pipeline call for a batch: its prompts as a list and a generator per sample, each seeded as the sample's
    own call would seed it (diffusers draws each sample's latents from its own generator)."""
    import torch

    return {**call_kwargs(cell, prompts[0], seeds[0]), "prompt": list(prompts),
            "generator": [torch.Generator("cpu").manual_seed(seed) for seed in seeds]}
