"""Render one job into its run directory: skip what exists, render what is pending, record the end.

`run_job` never raises for a failure of the cell itself: it writes FAILED.json with the failure's
category and returns a `CellResult`, so the other cells of a sweep still run.
"""

from __future__ import annotations

import io
import json
import logging
import resource
import secrets
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from render import axes, provenance, rundir
from render.axes.compile import CompileCounters
from render.attention import BackendUnavailable
from render.cell import Job, anchor_dir, anchor_job
from render.pipeline import LoadedPipeline, PipelineCache, call_kwargs, configure

log = logging.getLogger("render")


class NonFiniteOutput(RuntimeError):
    """The pipeline produced NaN or infinite pixels."""


class Cancelled(RuntimeError):
    """The job was asked to stop (SIGTERM, scancel)."""


@dataclass
class CellResult:
    run_dir: Path
    cell_key: str
    describe: str
    status: str  # done | failed
    n_rendered: int = 0
    n_reused: int = 0
    category: str | None = None
    message: str | None = None


def classify(error: BaseException) -> str:
    """The FAILED.json category of an exception."""
    text = str(error).lower()
    name = type(error).__name__
    if name == "OutOfMemoryError" or "out of memory" in text:
        return "oom"
    if isinstance(error, BackendUnavailable) or "is not usable because" in text or "backend" in text and "not available" in text:
        return "backend-unavailable"
    if isinstance(error, NonFiniteOutput):
        return "non-finite-output"
    if isinstance(error, (Cancelled, KeyboardInterrupt, SystemExit)):
        return "cancelled"  # SystemExit: submitit leaving after it requeued a preempted or timed-out job
    if isinstance(error, TimeoutError) or name == "UncompletedJobError" and "timed-out" in text:
        return "timeout"
    return "error"


def run_json(job: Job, overrides: list[str], launcher: str) -> dict[str, Any]:
    return {
        "schema": 1,
        "cell_key": job.cell.key,
        "cell": job.cell.canonical(),
        "describe": job.cell.describe(),
        "anchor": {"cell_key": job.anchor.key, "cell": job.anchor.canonical(), "overrides": job.anchor_overrides,
                   "dir": str(anchor_dir(job).relative_to(job.out_root))},
        "is_anchor": job.is_anchor,
        "prompts": {"name": job.prompts_name, "split": job.split, "file": job.prompts_file, "ids": [p.id for p in job.prompts]},
        "seeds": job.seeds,
        "overrides": overrides,
        "out_root": str(job.out_root),
        "tag": job.tag,
        "config": job.config,
        "versions": provenance.versions(),
        "device": provenance.device_info(job.device),
        "git": provenance.git_state(),
        **rundir.host_identity(),
        "job": provenance.job_info(launcher),
        "started_at": rundir.now_iso(),
    }


def peak_memory(device: str) -> tuple[int, str]:
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.max_memory_allocated(device)), "cuda-max-allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "cpu-rss-hwm"


def render_sample(loaded: LoadedPipeline, job: Job, prompt: str, seed: int) -> tuple[bytes, float, int, str]:
    """One pipeline call: PNG bytes, device-synchronised latency, peak memory and its kind."""
    import numpy as np
    import torch
    from PIL import Image

    cuda = job.device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats(job.device)
        torch.cuda.synchronize(job.device)
    start = time.perf_counter()
    with torch.inference_mode():
        pixels = loaded.pipe(**call_kwargs(job.cell, prompt, seed)).images[0]
    if cuda:
        torch.cuda.synchronize(job.device)
    latency = time.perf_counter() - start
    if not np.isfinite(pixels).all():
        raise NonFiniteOutput(f"sample ({prompt!r}, seed {seed}) has non-finite pixels ({int((~np.isfinite(pixels)).sum())} values)")
    buffer = io.BytesIO()
    Image.fromarray((np.clip(pixels, 0, 1) * 255).round().astype("uint8")).save(buffer, format="PNG")
    memory, kind = peak_memory(job.device)
    return buffer.getvalue(), latency, memory, kind


def _render_pending(job: Job, run_dir: Path, pending: list[tuple[str, int]], store: rundir.SampleStore,
                    pipelines: PipelineCache, progress: Any) -> int:
    texts = {p.id: p.text for p in job.prompts}
    loaded = pipelines.get(job.cell.model, job.device, axes.load_options(job.cell))
    load_s = loaded.load_s if loaded.load_unrecorded else 0.0

    def calibrate() -> None:  # MagCache: one full render with the cell's settings, no record kept
        prompt_id, seed = job.sample_ids[0]
        loaded.pipe(**call_kwargs(job.cell, texts[prompt_id], seed))

    configure(loaded, job.cell, job.cache_conf, calibrate)
    if loaded.fresh:  # newly configured: the cell's warm-up calls start again
        loaded.warmups_left = job.warmup if job.warmup is not None else axes.default_warmups(job.cell)
    rendered = 0
    for prompt_id, seed in pending:
        first_call, before = loaded.fresh, CompileCounters.now()
        png, latency, memory, kind = render_sample(loaded, job, texts[prompt_id], seed)
        compiled = CompileCounters.now().since(before)
        image = f"{rundir.IMAGES}/{rundir.image_name(prompt_id, seed)}"
        rundir.atomic_write_bytes(run_dir / image, png)
        record = {"cell_key": job.cell.key, "prompt_id": prompt_id, "prompt": texts[prompt_id], "seed": seed, "image": image,
                  "width": job.cell.width, "height": job.cell.height, "latency_s": round(latency, 6), "warmup": loaded.warmups_left > 0,
                  "steps": job.cell.steps, "s_per_step": round(latency / job.cell.steps, 6), "peak_mem_bytes": memory,
                  "mem_kind": kind, "load_s": round(load_s, 4), "compile_s": round(compiled.seconds, 4),
                  "compiled_frames": compiled.frames, "recompiles": 0 if first_call else compiled.frames,
                  "weights_bytes": loaded.weights_bytes, "reused_from": None, "finished_at": rundir.now_iso()}
        rundir.append_record(run_dir / rundir.SAMPLES, record)
        store.add(job.cell.key, run_dir, record)
        loaded.fresh, loaded.load_unrecorded, load_s = False, False, 0.0
        loaded.warmups_left -= 1
        rendered += 1
        progress.update(1)
    return rendered


def run_job(job: Job, run_dir: Path, *, store: rundir.SampleStore, pipelines: PipelineCache,
            overrides: list[str], launcher: str = "inprocess", progress_factory: Any = None) -> list[CellResult]:
    """Render the job's anchor samples when missing, then the cell's. Returns one result per run directory."""
    results: list[CellResult] = []
    wants_anchor = job.render_anchor and not job.is_anchor and bool(store.pending(job.anchor.key, job.sample_ids))
    deferred = wants_anchor and not _render_anchor(job, store, pipelines, launcher, progress_factory, results, wait=False)
    results.append(_run_cell(job, run_dir, store, pipelines, overrides, launcher, progress_factory))
    if deferred:  # another job was rendering the anchor: check what it left missing once it is done
        _render_anchor(job, store, pipelines, launcher, progress_factory, results, wait=True)
    return results


def _render_anchor(job: Job, store: rundir.SampleStore, pipelines: PipelineCache, launcher: str,
                   progress_factory: Any, results: list[CellResult], *, wait: bool) -> bool:
    """Render the anchor's missing samples under a lock, so parallel jobs never render them twice.
    Returns False when `wait` is off and another job holds the lock."""
    with rundir.exclusive(anchor_dir(job) / ".lock", wait=wait) as acquired:
        if not acquired:
            return False
        store.refresh()  # another process may have rendered them since the scan
        if store.pending(job.anchor.key, job.sample_ids):
            anchor = anchor_job(job)
            folder = anchor_dir(job) / f"{time.strftime('%Y-%m-%d_%H-%M-%S')}-{secrets.token_hex(2)}"
            log.info("rendering the anchor's missing samples into %s", folder)
            results.append(_run_cell(anchor, folder, store, pipelines, anchor.anchor_overrides, launcher, progress_factory))
    return True


def resume_state(run_dir: Path) -> str | None:
    """When a requeued job comes back to a cell's folder: a finished cell stays finished; a cell that was
    cancelled or timed out is taken up again (its samples are kept); other failures are kept as they are."""
    state = rundir.terminal_state(run_dir)
    if state == "failed" and json.loads((run_dir / rundir.FAILED).read_text())["category"] in ("cancelled", "timeout"):
        (run_dir / rundir.FAILED).unlink()
        return None
    return state


def _run_cell(job: Job, run_dir: Path, store: rundir.SampleStore, pipelines: PipelineCache,
              overrides: list[str], launcher: str, progress_factory: Any) -> CellResult:
    from tqdm import tqdm

    run_dir.mkdir(parents=True, exist_ok=True)
    result = CellResult(run_dir, job.cell.key, job.cell.describe(), "done")
    state = resume_state(run_dir)
    if state is not None:  # a requeued job back at a cell it already ended
        log.info("cell %s already ended (%s) in %s: nothing to do", job.cell.key, state, run_dir)
        if state == "failed":
            failed = json.loads((run_dir / rundir.FAILED).read_text())
            result.status, result.category, result.message = "failed", failed["category"], failed["message"]
        return result
    started = time.perf_counter()
    sample = None
    try:
        rundir.atomic_write_json(run_dir / rundir.RUN_JSON, run_json(job, overrides, launcher))
        existing = store.existing(job.cell.key)
        for key in job.sample_ids:
            if key in existing and existing[key].run_dir != run_dir:
                rundir.append_record(run_dir / rundir.SAMPLES, rundir.link_sample(existing[key], run_dir, job.out_root))
                result.n_reused += 1
        pending = store.pending(job.cell.key, job.sample_ids)
        log.info("cell %s (%s): %d samples, %d reused, %d to render", job.cell.key, job.cell.describe(),
                 len(job.sample_ids), result.n_reused, len(pending))
        if pending:
            bar = (progress_factory or tqdm)(total=len(pending), desc=f"{job.cell.key[:8]} samples", unit="img", leave=False)
            try:
                result.n_rendered = _render_pending(job, run_dir, pending, store, pipelines, bar)
            finally:
                bar.close()
        records = rundir.read_records(run_dir / rundir.SAMPLES)
        gpu_s = sum(r["latency_s"] for r in records if r.get("reused_from") is None)
        rundir.write_done(run_dir, n_samples=len(records), n_rendered=result.n_rendered, n_reused=result.n_reused,
                          wall_s=round(time.perf_counter() - started, 4), gpu_s=round(gpu_s, 4))
    except BaseException as error:  # noqa: B902 - every failure, cancellation included, is recorded
        result.status, result.category, result.message = "failed", classify(error), f"{type(error).__name__}: {error}"
        log.error("cell %s failed (%s): %s", job.cell.key, result.category, result.message)
        rundir.write_failed(run_dir, result.category, result.message, traceback.format_exc(), sample=sample,
                            n_samples_done=len(rundir.read_records(run_dir / rundir.SAMPLES)))
        if not isinstance(error, Exception):
            raise
    return result
