"""Render one job into its run directory: reuse what exists (verified), render what is pending (claimed),
record the end.

`run_job` never raises for a failure of the cell itself: it writes FAILED.json with the failure's
category and returns a `CellResult`, so the other cells of a sweep still run. A cancellation
(SIGTERM, SIGINT) is recorded as `cancelled` and then ends the process.

Longer than the house's ~300 lines: the cell writer (claims, verified reuse, the watchdog) and the
cell's life (plan, run.json, terminal record) are one transaction on one folder.
"""

from __future__ import annotations

import contextlib
import io
import logging
import resource
import secrets
import statistics
import time
import traceback
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypedDict

from render import axes, rundir
from render.run import provenance
from render.run import ranks
from render.axes.caches import count_engagement
from render.axes.compile import CompileCounters
from render.axes.attention import BackendUnavailable
from render.axes.quant import kernel_note
from render.cell import Job, anchor_dir, twin_dir
from render.cell import companions as companions_of
from render.errors import RenderError
from render.laws.admission import BudgetStop, guard_for
from render.run.stage_clock import StageSplit, stage_clock
from render.laws.spend import Purpose, spend_load, spending
from render.run.loader import LoadedPipeline, PipelineCache, batch_kwargs, call_kwargs, configure
from render.rundir import Category, CellState
from render.run.signals import Cancelled
from render.rundir.redact import redact_data, redact_files
from render.compose.spec import Cell
from render.suites._base import shown
from render.run.measure import CLOCK, drift
from render.rundir.watchdog import project

log = logging.getLogger("render")


class Labels(TypedDict, total=False):
    """A prompt's labels in its split, copied onto each of its sample records."""

    category: str | None
    challenge: str | None


class NonFiniteOutput(RenderError, RuntimeError):
    """The pipeline produced NaN or infinite pixels."""


@dataclass
class CellResult:
    run_dir: Path
    cell_key: str
    describe: str
    status: CellState  # DONE or FAILED
    n_rendered: int = 0
    n_reused: int = 0
    category: Category | None = None
    message: str | None = None
    is_anchor: bool = False


def classify(error: BaseException) -> Category:
    """The FAILED.json category of an exception (a job the scheduler ended: render.rundir.category_of_job_state)."""
    text = str(error).lower()
    name = type(error).__name__
    if name == "OutOfMemoryError" or isinstance(error, MemoryError) or "out of memory" in text:
        return Category.OOM
    if isinstance(error, BackendUnavailable) or "is not usable because" in text or "backend" in text and "not available" in text:
        return Category.BACKEND_UNAVAILABLE
    if isinstance(error, NonFiniteOutput):
        return Category.NON_FINITE_OUTPUT
    if isinstance(error, (Cancelled, KeyboardInterrupt, SystemExit, BudgetStop)):
        # SystemExit: submitit leaving after it requeued a preempted or timed-out job; BudgetStop: the experiment
        # reached its navigable ceiling (the message says "budget: ...")
        return Category.CANCELLED
    if isinstance(error, TimeoutError) or name == "UncompletedJobError" and "timed-out" in text:
        return Category.TIMEOUT
    return Category.ERROR


def run_json(job: Job, overrides: list[str], launcher: str, estimate: dict[str, Any]) -> dict[str, Any]:
    """run.json's object: the record, credentials in URLs redacted (render.rundir.redact); the cells, which the keys
    hash, as they are."""
    record = redact_data(run_record(job, overrides, launcher, estimate).as_dict())
    record["cell"], record["anchor"]["cell"] = job.cell.canonical(), job.anchor.canonical()
    return record


def run_record(job: Job, overrides: list[str], launcher: str, estimate: dict[str, Any]) -> rundir.RunRecord:
    host = rundir.host_identity()
    return rundir.RunRecord(
        schema=rundir.CONTRACT_VERSION,
        cell_key=job.cell.key,
        cell=job.cell.canonical(),
        describe=job.cell.describe(),
        anchor=rundir.AnchorRef(job.anchor.key, job.anchor.canonical(), tuple(job.anchor_overrides),
                                str(anchor_dir(job).relative_to(job.out_root))),
        is_anchor=job.is_anchor,
        prompts=rundir.PromptsRef(job.prompts_name, tuple(p.id for p in job.prompts), job.split, job.prompts_file,
                                  {p.id: rundir.text_hash(p.text) for p in job.prompts}),
        seeds=tuple(job.seeds),
        overrides=tuple(overrides),
        out_root=str(job.out_root),
        tag=job.tag,
        config=job.config,
        versions=provenance.versions(),
        device=provenance.device_info(job.device),
        git=provenance.git_state(),
        host=host["host"],
        pid=host["pid"],
        job=provenance.job_info(launcher),
        estimate=estimate,
        started_at=rundir.now_iso(),
        ledger=launch_stamp(job),
    )


def launch_stamp(job: Job) -> dict[str, Any]:
    """The experiment's identity and the ledger head in force at this launch (empty outside an experiment)."""
    from render.laws import Ledger
    from render.laws.ledger import ledger_stamp

    if job.experiment is None:
        return {}
    return ledger_stamp(Ledger(job.experiment.name, job.out_root))


def peak_memory(device: str) -> tuple[int, str]:
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.max_memory_allocated(device)), "cuda-max-allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "cpu-rss-hwm"


def timed_call(loaded: LoadedPipeline, cell: Cell, device: str, prompt: str, seed: int) -> tuple[Any, float]:
    """One pipeline call of one sample (the generator seeded for it): its pixels and its device-synchronised
    seconds. The render and the side-by-side timing (render.timing.sessions) time exactly this."""
    ranks.lead(cell.key, prompt, seed)  # a parallel cell's other ranks make the same call
    pixels, seconds = _timed(loaded, cell, device, call_kwargs(cell, prompt, seed))
    return pixels[0], seconds


def timed_batch(loaded: LoadedPipeline, cell: Cell, device: str, prompts: Sequence[str], seeds: Sequence[int]
                ) -> tuple[list[Any], float]:
    """One pipeline call of a batch (a batched cell's: never parallel), each sample with its own seeded generator,
    so its pixels do not depend on the others of its call beyond numerical noise: each one's pixels, the call's
    seconds."""
    return _timed(loaded, cell, device, batch_kwargs(cell, prompts, seeds))


def _timed(loaded: LoadedPipeline, cell: Cell, device: str, kwargs: dict[str, Any]) -> tuple[list[Any], float]:
    import torch

    from render.models.families import family

    clips = family(cell.model.family).clips  # a video pipeline returns `.frames`
    cuda = device.startswith("cuda")
    with stage_clock(loaded.pipe, device) as clock:  # where the call's time goes: loaded.stages (render.run.stage_clock)
        if cuda:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        clock.mark("call", "start")
        with torch.inference_mode():
            output = loaded.pipe(**kwargs)
        pixels = list(output.frames if clips else output.images)
        clock.mark("call", "end")
        if cuda:
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - start
    loaded.stages = clock.split()
    return pixels, seconds


def png_bytes(pixels: Any, what: str, fps: int | None = None) -> bytes:
    """The sample's file: 8-bit PNG of the pipeline's [0, 1] pixels (NonFiniteOutput names `what`); a clip
    (frames x height x width x 3) is an animated PNG at `fps` (render.run.apng)."""
    import numpy as np
    from PIL import Image

    from render.run.apng import clip_bytes

    if not np.isfinite(pixels).all():
        raise NonFiniteOutput(f"{what} has non-finite pixels ({int((~np.isfinite(pixels)).sum())} values)")
    data = (np.clip(pixels, 0, 1) * 255).round().astype("uint8")
    if data.ndim == 4:
        if fps is None:
            raise ValueError(f"{what} is a clip of {len(data)} frames but its model names no fps")
        return clip_bytes(data, fps)
    buffer = io.BytesIO()
    Image.fromarray(data).save(buffer, format="PNG")
    return buffer.getvalue()


def clip_fields(cell: Cell, latency: float) -> dict[str, Any]:
    """A clip sample's frames, rate and seconds per frame (its record's; an image's has none)."""
    frames = cell.model.num_frames
    return {} if frames is None else {"frames": frames, "fps": cell.model.fps, "s_per_frame": round(latency / frames, 6)}


def median_split(latencies: Sequence[float], splits: Sequence[StageSplit | None]) -> StageSplit | None:
    """The stage split of the call whose latency is the median (the lower one of an even count): the sample's."""
    if not splits:
        return None
    order = sorted(range(len(latencies)), key=latencies.__getitem__)
    return splits[order[(len(order) - 1) // 2]]


def render_sample(loaded: LoadedPipeline, job: Job, prompt: str, seed: int, calls: int = 1
                  ) -> tuple[bytes, list[float], int, str]:
    """`calls` pipeline calls of one sample (the same image each time: the generator is seeded per call): PNG
    bytes of the first, each call's device-synchronised latency, peak memory and its kind."""
    pngs, latencies, memory, kind = render_samples(loaded, job, [prompt], [seed], calls)
    return pngs[0], latencies, memory, kind


def render_samples(loaded: LoadedPipeline, job: Job, prompts: Sequence[str], seeds: Sequence[int], calls: int = 1
                   ) -> tuple[list[bytes], list[float], int, str]:
    """`calls` pipeline calls of these samples, one at a time (timed_call) or, for a batched cell, all in each call
    (timed_batch): each sample's PNG bytes of the first call, each call's latency, peak memory and its kind."""
    import torch

    if job.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(job.device)
    latencies: list[float] = []
    splits: list[StageSplit | None] = []
    pixels: list[Any] | None = None
    loaded.stages = None
    for _ in range(calls):
        if job.cell.batch > 1:
            images, seconds = timed_batch(loaded, job.cell, job.device, prompts, seeds)
        else:
            (prompt,), (seed,) = prompts, seeds
            image, seconds = timed_call(loaded, job.cell, job.device, prompt, seed)
            images = [image]
        latencies.append(seconds)
        splits.append(loaded.stages)
        pixels = images if pixels is None else pixels
    loaded.stages = median_split(latencies, splits)
    assert pixels is not None and len(pixels) == len(prompts), "a pipeline call returned another number of images"
    pngs = [png_bytes(p, f"sample ({shown(t)}, seed {s})", job.cell.model.fps) for p, t, s in zip(pixels, prompts, seeds)]
    memory, kind = peak_memory(job.device)
    return pngs, latencies, memory, kind


class CellWriter:
    """Fills one run directory: each wanted sample exactly once, linked when it exists, rendered when not."""

    def __init__(self, job: Job, run_dir: Path, run: rundir.RunRecord, store: rundir.SampleStore,
                 pipelines: PipelineCache, result: CellResult) -> None:
        self.job, self.run_dir, self.run, self.store, self.pipelines, self.result = job, run_dir, run, store, pipelines, result
        self.loaded: LoadedPipeline | None = None
        self.load_s = 0.0
        self.records: list[rundir.SampleRecord] = []
        self.current: dict[str, Any] | None = None  # the sample being produced, named in FAILED.json
        self.warned = False
        self.labels: dict[str, Labels] = {p.id: {"category": p.category, "challenge": p.challenge} for p in job.prompts}
        self.guard = guard_for(job)  # an experiment's budget: stops before the final's reserve is spent
        self.last_s = 0.0
        self.ref_s: float | None = None  # the reference workload at this cell's start (render.run.measure)

    def pipeline(self) -> LoadedPipeline:
        """The cell's pipeline, loaded (or taken from the cache) and configured for it on first use."""
        if self.loaded is None:
            job = self.job
            loaded = self.pipelines.get(job.cell.model, job.device, axes.load_options(job.cell))
            self.load_s = loaded.load_s if loaded.load_unrecorded else 0.0

            def calibrate() -> None:  # MagCache: one full render with the cell's settings, no record kept
                prompt_id, text, seed = job.samples[0]
                with spending(job, Purpose.CALIBRATE):
                    ranks.lead(job.cell.key, text, seed)
                    loaded.pipe(**call_kwargs(job.cell, text, seed))

            spend_load(job, loaded)

            configure(loaded, job.cell, calibrate, record_in=self.run_dir / rundir.RUN_JSON)
            if loaded.fresh:  # newly configured: the cell's warm-up calls start again
                loaded.warmups_left = job.warmup if job.warmup is not None else axes.default_warmups(job.cell)
            self.loaded = loaded
        return self.loaded

    def _append(self, *records: rundir.SampleRecord) -> None:
        if not records:
            return
        appended = rundir.append_records(self.run_dir / rundir.SAMPLES, [record.as_dict() for record in records])
        self.store.add(self.run_dir, *records, appended=appended)
        self.records.extend(records)

    def linked(self, found: rundir.ExistingSample, prompt_id: str, **labels: Any) -> rundir.SampleRecord:
        """A finished sample made part of this run: its record names this launch's ledger head, not its renderer's."""
        return replace(rundir.link_sample(found, self.run_dir, self.job.out_root, prompt_id), **labels,
                       ledger=self.run.ledger or None)

    def produce(self, *samples: tuple[str, str, int]) -> None:
        """Under the samples' claims: link each finished copy (another process may have made it), render the rest in
        one pipeline call (one sample, or up to a batched cell's batch)."""
        self.store.refresh_cell(self.job.cell.key)
        todo = []
        for prompt_id, text, seed in samples:
            found = self.store.find(self.job.cell.key, prompt_id, text, seed)
            if found is None:
                todo.append((prompt_id, text, seed))
            elif found.folder != self.run_dir.resolve() or found.record.prompt_id != prompt_id:
                # the labels are this split's, not the found run's
                self._append(self.linked(found, prompt_id, **self.labels.get(prompt_id, {})))
                self.result.n_reused += 1
        if todo:
            self._render(todo)

    def _render(self, todo: list[tuple[str, str, int]]) -> None:
        """One pipeline call of these samples (each its own seeded generator) and their records: a batch's each hold
        the call's seconds (latency_s), its size (batch) and its share of the device time (share_s)."""
        self.current = {"prompt_id": todo[0][0], "seed": todo[0][2],
                        **({"batch": [[p, s] for p, _, s in todo]} if len(todo) > 1 else {})}
        if self.guard is not None:
            self.guard.before(self.last_s)
        loaded = self.pipeline()
        first_call, before, warmup = loaded.fresh, CompileCounters.now(), loaded.warmups_left > 0
        cell, n = self.job.cell, len(todo)
        identities = [(cell.key, rundir.sample_text_hash(text), seed) for _, text, seed in todo]
        repeats = 1 if warmup else self.job.timing.repeats
        with spending(self.job, Purpose.SAMPLE, samples=identities), count_engagement(loaded.pipe) as engagement:
            pngs, calls, memory, kind = render_samples(loaded, self.job, [t for _, t, _ in todo],
                                                       [s for _, _, s in todo], repeats)
        compiled = CompileCounters.now().since(before)
        engaged = engagement()
        engaged = engaged.per_call(len(calls)) if engaged else None
        stages = loaded.stages  # the median call's (render.run.stage_clock)
        latency = statistics.median(calls)  # what a user waits for each image of the call
        batch, share = (n, round(latency / n, 6)) if cell.batch > 1 else (None, None)
        records = []
        for i, ((prompt_id, text, seed), png) in enumerate(zip(todo, pngs)):
            image = f"{rundir.IMAGES}/{rundir.image_name(prompt_id, seed)}"
            rundir.atomic_write_bytes(self.run_dir / image, png)
            records.append(rundir.SampleRecord(
                cell_key=cell.key, prompt_id=prompt_id, seed=seed, prompt=text, image=image, width=cell.width,
                height=cell.height, latency_s=round(latency, 6), warmup=warmup, steps=cell.steps,
                s_per_step=round(latency / cell.steps, 6), peak_mem_bytes=memory, mem_kind=kind,
                load_s=round(self.load_s, 4) if i == 0 else 0.0,  # the load is the call's, paid once
                reused_from=None, finished_at=rundir.now_iso(), sha256=rundir.digest(png), bytes=len(png),
                prompt_sha=rundir.sample_text_hash(text), compile_s=round(compiled.seconds / n, 4),
                compiled_frames=compiled.frames, recompiles=0 if first_call else compiled.frames,  # (the call's)
                weights_bytes=loaded.weights_bytes, compile_cache_hits=compiled.cache_hits,
                compile_cache_misses=compiled.cache_misses, ref_s=self.ref_s, gpus=self.job.gpus if self.job.gpus > 1 else None,
                latency_calls=tuple(round(c, 6) for c in calls) if len(calls) > 1 else None,
                **clip_fields(cell, latency), **(engaged.as_dict() if engaged else {}), **self.labels.get(prompt_id, {}),
                ledger=self.run.ledger or None, batch=batch, share_s=share,
                **(stages.as_fields() if stages is not None else {})))
        self._append(*records)  # one write and fsync for the call's samples
        self.last_s = latency
        loaded.fresh, loaded.load_unrecorded, self.load_s = False, False, 0.0
        loaded.warmups_left -= 1
        self.result.n_rendered += n
        self._watch()

    def _watch(self) -> None:
        projection = project(self.run, self.records, None)  # a sample just finished: none is in progress
        if projection is not None and projection.overdue and not self.warned:
            self.warned = True
            log.warning("watchdog: cell %s is slow: %s", self.result.describe, projection.message())

    def fill(self, pending: list[tuple[str, str, int]], progress: Any) -> None:
        """Render or link every pending sample, a call per `batch` of them (one for a cell of batch 1); samples
        another process has claimed are taken last, after waiting for its claim (a claim dies with its process, so
        no wait is forever; a batch's claims are taken in one order by every process, so no two wait on each other)."""
        size, key = self.job.cell.batch, self.job.cell.key
        deferred: list[tuple[str, str, int]] = []
        for group in batches(pending, size):
            with ExitStack() as claims:
                mine: list[tuple[str, str, int]] = []
                for sample in group:
                    claimed = claims.enter_context(self.store.claim(key, sample[1], sample[2], wait=False))
                    (mine if claimed else deferred).append(sample)
                if mine:
                    self.produce(*mine)
            progress.update(len(mine))
        for group in batches(deferred, size):
            with ExitStack() as claims:
                for sample in sorted(group, key=lambda s: (rundir.sample_text_hash(s[1]), s[2])):
                    claims.enter_context(self.store.claim(key, sample[1], sample[2], wait=True))
                self.produce(*group)
            progress.update(len(group))


def batches(samples: list[tuple[str, str, int]], size: int) -> list[list[tuple[str, str, int]]]:
    return [samples[i:i + size] for i in range(0, len(samples), size)]


def plan(job: Job, run_dir: Path, store: rundir.SampleStore) -> tuple[dict[tuple[str, str, int], rundir.ExistingSample], list]:
    """(samples to link from elsewhere, samples to render) of a cell; samples already in `run_dir` need neither."""
    reuse, pending = {}, []
    here = run_dir.resolve()
    for sample in job.samples:
        found = store.find(job.cell.key, *sample)
        if found is None:
            pending.append(sample)
        elif found.folder != here or found.record.prompt_id != sample[0]:
            reuse[sample] = found
    return reuse, pending


def estimate_for(job: Job, store: rundir.SampleStore, n_pending: int) -> dict[str, Any]:
    """What the watchdog compares against: the cell's own median warm latency when it has history."""
    own = sorted(r.latency_s for r in store.rendered(job.cell.key) if not r.warmup and r.latency_s)
    return {"n_pending": n_pending, "s_per_sample": own[len(own) // 2] if own else None}


def run_job(job: Job, run_dir: Path, *, store: rundir.SampleStore, pipelines: PipelineCache,
            overrides: list[str], launcher: str = "inprocess", progress_factory: Any = None,
            defer: Deferral | None = None) -> list[CellResult]:
    """Render the job's anchor samples when missing, then the cell's. Returns one result per run directory.

    `defer` (an interleaved sweep, render.timing.interleave): when it takes the job, each cell with samples to render is
    opened and handed to it instead of filled here; its result is completed in place when the sweep renders it."""
    defer = defer if defer is not None and defer.takes(job, store) else None
    results: list[CellResult] = []
    # frozen references rendered alongside, once: the anchor, and a parallel cell's width-1 twin (parity)
    companions = [(c, anchor_dir(job), job.anchor_overrides) if c.cell == job.anchor else
                  (c, twin_dir(job), twin_overrides(overrides)) for c in companions_of(job)]
    deferred = [c for c in companions if (missing := store.pending(c[0].cell.key, job.samples))
                and not (defer is not None and defer.covers(c[0].cell.key, missing))
                and not _render_companion(*c, store, pipelines, launcher, progress_factory, results, wait=False,
                                          defer=defer)]
    results.append(start_cell(CellRun(job, run_dir, store, pipelines, overrides, launcher), progress_factory, defer))
    for companion in deferred:  # another job was rendering it: check what it left missing once it is done
        _render_companion(*companion, store, pipelines, launcher, progress_factory, results, wait=True, defer=defer)
    return results


def twin_overrides(overrides: list[str]) -> list[str]:
    """A parallel cell's overrides with its parallel choice (and degrees) replaced by parallel=none."""
    return [o for o in overrides if o.lstrip("+~").split("=")[0].split(".")[0] != "parallel"] + ["parallel=none"]


def _render_companion(companion: Job, root: Path, overrides: list[str], store: rundir.SampleStore,
                      pipelines: PipelineCache, launcher: str, progress_factory: Any, results: list[CellResult], *,
                      wait: bool, defer: Deferral | None = None) -> bool:
    """Render an anchor's (or twin's) missing samples under a lock, so parallel jobs never render them twice.
    Returns False when `wait` is off and another job holds the lock."""
    with rundir.exclusive(root / ".lock", wait=wait) as acquired:
        if not acquired:
            return False
        store.refresh()  # another process may have rendered them since the scan
        if store.pending(companion.cell.key, companion.samples):
            folder = root / f"{time.strftime('%Y-%m-%d_%H-%M-%S')}-{secrets.token_hex(2)}"
            log.info("rendering the missing samples of %s into %s", companion.cell.describe(), folder)
            run = CellRun(companion, folder, store, pipelines, overrides, launcher)
            results.append(start_cell(run, progress_factory, defer))
    return True


def resume_state(run_dir: Path) -> CellState | None:
    """When a requeued job comes back to a cell's folder: a finished cell stays finished; a cell that was
    cancelled or timed out is taken up again (its samples are kept); other failures are kept as they are."""
    terminal = rundir.read_terminal(run_dir)
    if terminal is not None and terminal.category in {c.value for c in Category if c.transient}:
        terminal.path.unlink()
        return None
    return None if terminal is None else terminal.kind


class Deferral(Protocol):
    """Who renders the opened cells of an interleaved sweep (render.timing.interleave.Interleave)."""

    def takes(self, job: Job, store: rundir.SampleStore) -> bool: ...

    def covers(self, cell_key: str, samples: list[tuple[str, str, int]]) -> bool: ...

    def add(self, run: CellRun) -> None: ...


def start_cell(run: CellRun, progress_factory: Any, defer: Deferral | None) -> CellResult:
    """Open the cell, then fill and close it here, or hand it to `defer` when it has samples to render."""
    try:
        if run.open():
            if defer is not None and run.pending:
                defer.add(run)
                return run.result
            run.fill(progress_factory)
            run.close()
    except BaseException as error:  # noqa: B902 - every failure, cancellation included, is recorded
        run.fail(error)
        if not isinstance(error, Exception):
            raise
    return run.result


class CellRun:
    """One cell's life in its run directory, one transaction on one folder: `open` plans it, writes run.json and
    links what exists; `fill` renders what is pending; `close` records DONE; `fail` records FAILED with its cause.
    A cell is opened, filled and closed in turn (start_cell), or, in an interleaved sweep, every cell is opened
    first, their samples rendered in shuffled rounds, then each closed (render.timing.interleave)."""

    def __init__(self, job: Job, run_dir: Path, store: rundir.SampleStore, pipelines: PipelineCache,
                 overrides: list[str], launcher: str) -> None:
        self.job, self.run_dir, self.store, self.pipelines = job, run_dir, store, pipelines
        self.overrides, self.launcher = overrides, launcher
        self.label = rundir.cell_label(overrides, job.is_anchor)  # the cell as the user wrote it (steps=8 cache=fbcache)
        self.result = CellResult(run_dir, job.cell.key, self.label, CellState.DONE, is_anchor=job.is_anchor)
        self.writer: CellWriter | None = None
        self.pending: list[tuple[str, str, int]] = []
        self.timing: dict[str, Any] = {"repeats": job.timing.repeats}
        self.started = time.perf_counter()
        self.ended = False

    def open(self) -> bool:
        """Plan the cell and write its run.json; False when its folder's cell already ended (a requeued job back at
        it: the result says how)."""
        job, run_dir, result = self.job, self.run_dir, self.result
        state = resume_state(run_dir) if run_dir.exists() else None
        if state is not None:
            log.info("cell %s already ended (%s) in %s: nothing to do", self.label, state, run_dir)
            if state == CellState.FAILED:
                failed = rundir.load_json(run_dir / rundir.FAILED)
                result.status, result.category, result.message = CellState.FAILED, Category(failed["category"]), failed["message"]
            self.ended = True
            return False
        self.started = time.perf_counter()
        run_dir.mkdir(parents=True, exist_ok=True)
        reuse, self.pending = plan(job, run_dir, self.store)
        run = run_json(job, self.overrides, self.launcher, estimate_for(job, self.store, len(self.pending)))
        rundir.atomic_write_json(run_dir / rundir.RUN_JSON, run)
        redact_files(*(run_dir / ".hydra").glob("*.yaml"), run_dir.parent / rundir.MULTIRUN_YAML)  # Hydra's records
        rundir.register(job.out_root, run_dir, job.cell.key)
        self.writer = CellWriter(job, run_dir, rundir.RunRecord.parse(run, str(run_dir / rundir.RUN_JSON)), self.store,
                                 self.pipelines, result)
        self.writer._append(*(self.writer.linked(found, prompt_id)
                              for (prompt_id, _, _), found in reuse.items()))  # one write and fsync for them all
        result.n_reused += len(reuse)
        log.info("cell %s (%s; %s): %d samples, %d reused, %d to render", self.label, job.cell.key, job.cell.describe(),
                 len(job.samples), result.n_reused, len(self.pending))
        return True

    def start_clock(self) -> None:
        """The reference workload before the cell's renders (render.run.measure), when the cell asks for it."""
        if self.pending and self.job.timing.reference and self.writer is not None:
            with spending(self.job, Purpose.REFERENCE):  # device work, spent (next to nothing when the last serves)
                self.writer.ref_s = self.timing["ref_start_s"] = round(CLOCK.start(self.job.device), 6)

    def fill(self, progress_factory: Any = None) -> None:
        """Render (or link) every pending sample, under the cell's ranks when it is parallel."""
        from render.run.progress import progress

        if not self.pending:
            return
        assert self.writer is not None
        self.start_clock()
        job = self.job
        bar = (progress_factory or progress)(total=len(self.pending), desc=f"{self.label} samples", unit="img")
        try:
            with ranks.team(job, job.gpus, self.pipelines) if job.gpus > 1 else contextlib.nullcontext():
                self.writer.fill(self.pending, bar)
        finally:
            bar.close()

    def close(self) -> None:
        """DONE.json: the cell's samples, what was rendered and reused, its wall and device seconds, its timing."""
        job, result = self.job, self.result
        if "ref_start_s" in self.timing and result.n_rendered:
            with spending(job, Purpose.REFERENCE):
                self.timing["ref_end_s"] = round(CLOCK.measure(job.device), 6)
            self.timing["drift"] = round(drift(self.timing["ref_start_s"], self.timing["ref_end_s"]), 4)
        records, _ = rundir.read_samples(self.run_dir, job.cell.key)
        gpu_s = sum(r.device_s for r in records if r.reused_from is None)
        rundir.write_done(self.run_dir, n_samples=len(records), n_rendered=result.n_rendered, n_reused=result.n_reused,
                          wall_s=round(time.perf_counter() - self.started, 4), gpu_s=round(gpu_s, 4), timing=self.timing)
        self.ended = True

    def fail(self, error: BaseException) -> None:
        """FAILED.json with the failure's category, message and the sample it was producing."""
        result, job = self.result, self.job
        result.status, result.category = CellState.FAILED, classify(error)
        result.message = f"{type(error).__name__}: {error}{kernel_note(job.cell.axes.get('quant'))}{batch_note(job, result)}"
        log.error("cell %s failed (%s): %s", self.label, result.category, result.message)
        _record_failure(self.run_dir, result, traceback.format_exc(), self.writer.current if self.writer else None)
        self.ended = True


def batch_note(job: Job, result: CellResult) -> str:
    """What a batched cell that ran out of memory says beside the error: the batch did not fit, not the cell."""
    if result.category != Category.OOM or job.cell.batch == 1:
        return ""
    return (f"; batch={job.cell.batch} did not fit in the device's memory (a call holds every sample of its batch): "
            f"batch={max(1, job.cell.batch // 2)} or a sweep of smaller batches shows where it fits")


def _record_failure(run_dir: Path, result: CellResult, trace: str, sample: dict[str, Any] | None) -> None:
    """FAILED.json; when even that cannot be written (disk full), the result says so and the sweep goes on."""
    try:
        records, _ = rundir.read_samples(run_dir, result.cell_key)
        rundir.write_failed(run_dir, result.category or Category.ERROR, result.message or "", trace, sample=sample,
                            n_samples_done=len(records))
    except (OSError, rundir.RunDirError) as error:
        log.error("cell %s: FAILED.json could not be written in %s: %s", result.describe, run_dir, error)
        result.message = f"{result.message}; FAILED.json could not be written ({type(error).__name__}: {error})"
