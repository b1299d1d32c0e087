"""Score run directories into the index: ingest runs and samples, then compute metrics.

Two passes over the runs given: first every run and its samples go into the index (anchors
first), so that cells scored in the same call find their anchor's samples; then each run's
sample metrics are computed outside any transaction and written in one short transaction.
A score already in the index with the same metric version and configuration is not
recomputed; an unavailable one is retried (its reason may have gone: anchor rendered since).

Longer than the house's ~300 lines: its two passes (ingest, then compute) share the plan of what is
missing and the anchor image cache.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shlex
from datetime import datetime, timezone
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assess.errors import disk_full
from assess.index.database import Index, ScoreRow, default_index_path, json_dumps, now_iso, remove_if_empty
from assess.metrics import Outcome, SampleInput, SampleMetric, build_metrics
from assess.metrics.ocr import quoted_text
from assess.metrics.speed import run_gpu_s
from assess.statistics.parity import parity_rows, stored_parity
from assess.scoring.sets import score_sets
from assess.scoring.tally import ScoreSummary
from render.rundir.untrusted import contained
from render.rundir import (CellState, ExistingSample, RunDir, RunDirError, SampleRecord, iter_run_dirs, load_run,
                           read_run_record, verify)
from render.rundir.walk import content_stamp, run_dirs_under, twin_dirs

if TYPE_CHECKING:
    import numpy as np

Log = Callable[[str], None]
Key = tuple[str, int]  # (text identity, seed): a sample of a cell by content (render.rundir.identity)


def mismatch(run_path: Path, sample: SampleRecord) -> str | None:
    """Why a sample's image file is not the one its record hashed (None when it is, or when a contract
    version 1 record carries no hash to check)."""
    if sample.sha256 is None:
        return None
    return verify(ExistingSample(run_path, sample))


def read_image(path: Path) -> np.ndarray:
    """An image file as H x W x 3 uint8; a truncated or corrupt file raises OSError."""
    import numpy as np
    from PIL import Image

    try:
        with Image.open(path) as image:
            image.load()
            return np.asarray(image.convert("RGB"))
    except (SyntaxError, ValueError) as exc:  # PIL reports some broken PNG chunks this way
        raise OSError(str(exc)) from exc


def render_command(run: RunDir, seeds: list[int]) -> str:
    """The command that renders the anchor's samples this run is compared with."""
    unique = sorted(set(seeds))
    seed = str(unique[0]) if len(unique) == 1 else f"[{','.join(str(s) for s in unique)}]"
    words = ["python", "-m", "render", *run.anchor_overrides, f"prompts={run.prompts_name}", f"seed={seed}"]
    return " ".join(shlex.quote(w) for w in words)


# -- ingest ---------------------------------------------------------------------------------


def run_row(run: RunDir) -> dict[str, Any]:
    """The run's `runs` row, from its folder alone (the index redacts the credentials of any URL it records as it
    writes the row: assess.index.writer)."""
    cell, terminal = run.cell, run.terminal
    cache = cell.get("cache")
    model = cell.get("model")
    failed = terminal.data if terminal and terminal.kind == CellState.FAILED else {}
    job = run.run.job
    git = run.run.git
    timing = (terminal.data.get("timing") if terminal else None) or {}  # DONE.json: the reference at start and end
    return {
        "path": str(run.path),
        "sweep": str(run.sweep) if run.sweep else None,
        "cell_key": run.cell_key,
        "describe": run.describe,
        "anchor_cell_key": run.anchor_cell_key,
        "is_anchor": int(run.is_anchor),
        "split": run.split,
        "prompts_name": run.prompts_name,
        "n_expected": run.n_expected,
        "n_samples": len(run.samples),
        "n_rendered": sum(1 for s in run.samples if not s.reused_from),
        "n_reused": sum(1 for s in run.samples if s.reused_from),
        "status": terminal.kind if terminal else "incomplete",
        "category": failed.get("category"),
        "message": failed.get("message"),
        "failed_record": str(terminal.path) if terminal and failed else None,
        "model": model.get("name") or model.get("id") if isinstance(model, dict) else model,
        "attention": cell.get("attention"),
        "cache": cache.get("name") if isinstance(cache, dict) else cache,
        "scheduler": cell.get("scheduler"),
        "steps": cell.get("steps"),
        "guidance": cell.get("guidance"),
        "height": cell.get("height"),
        "width": cell.get("width"),
        "device_kind": cell.get("device_kind"),
        "cell": json_dumps(cell),
        "overrides": json_dumps(run.overrides),
        "anchor_overrides": json_dumps(run.anchor_overrides),
        "prompt_ids": json_dumps(run.prompt_ids),
        "prompt_shas": json_dumps(run.prompt_text_ids),
        "seeds": json_dumps(run.seeds),
        "host": run.run.host,
        "pid": run.run.pid,
        "launcher": job.get("launcher"),
        "slurm_job_id": None if job.get("slurm_job_id") is None else str(job["slurm_job_id"]),
        "started_at": run.run.started_at,
        "finished_at": terminal.finished_at if terminal else None,
        "wall_s": terminal.data.get("wall_s") if terminal else None,
        "gpu_s": run_gpu_s(run.samples),
        "ref_drift": timing.get("drift"),
        "repeats": timing.get("repeats"),
        "git_revision": git.get("revision"),
        "git_dirty": None if git.get("dirty") is None else int(bool(git["dirty"])),
        "versions": json_dumps(run.run.versions),
        "problems": json_dumps(run.problems),
        "indexed_at": now_iso(),
    }


ENGAGEMENT_COLUMNS = ("steps_computed", "steps_reused", "blocks_computed", "blocks_reused", "compile_s", "compiled_frames",
                      "compile_cache_hits", "compile_cache_misses")  # samples.jsonl fields the index keeps (0006)


def sample_row(run: RunDir, sample: SampleRecord) -> dict[str, Any]:
    try:
        image = run.image_path(sample)
        problem = None if image.is_file() else f"image missing: {image}"
    except OSError as exc:  # a path or symlink out of the run folder (render.rundir.untrusted)
        problem = str(exc)
    return {
        "cell_key": sample.cell_key, "prompt_sha": sample.text_id, "prompt_id": sample.prompt_id, "seed": sample.seed,
        "split": run.split, "run_path": str(run.path), "image": sample.image, "prompt": sample.prompt,
        "width": sample.width, "height": sample.height, "latency_s": sample.latency_s,
        "warmup": int(sample.warmup), "steps": sample.steps, "s_per_step": sample.s_per_step,
        "peak_mem_bytes": sample.peak_mem_bytes, "mem_kind": sample.mem_kind, "load_s": sample.load_s,
        "reused_from": sample.reused_from, "finished_at": sample.finished_at,
        "category": sample.category, "challenge": sample.challenge,
        "ref_s": sample.ref_s, "latency_calls": json_dumps(list(sample.latency_calls)) if sample.latency_calls else None,
        "device_s": sample.device_s, "sha256": sample.sha256,
        "frames": sample.frames, "fps": sample.fps, "s_per_frame": sample.s_per_frame,
        "batch": sample.batch, "share_s": sample.share_s,
        "text_s": sample.text_s, "denoise_s": sample.denoise_s, "vae_s": sample.vae_s,
        **{name: getattr(sample, name) for name in ENGAGEMENT_COLUMNS},
        "problem": problem,
    }


def ingest_run(index: Index, run: RunDir, refresh: bool = True) -> None:
    """The run's `runs` row, its samples and its timing sessions; its cell's derived rows too unless `refresh` is off
    (a scoring of many runs refreshes each cell it touched once, at its end: Touched)."""
    from render.rundir.session_log import read_sessions

    with index.write() as conn:
        index.upsert_run(conn, run_row(run))
        index.upsert_samples(conn, [sample_row(run, s) for s in run.samples])
        if refresh:
            index.refresh_cell(conn, run.cell_key)
    sessions, _unreadable = read_sessions(run.path)  # side-by-side timings (a torn record is skipped, as a sample's)
    for session in sessions:
        index.upsert_timing(session)


# -- metrics --------------------------------------------------------------------------------


CHUNK = 64  # samples whose images are in memory at once
CACHE_BYTES = 1 << 30  # anchor images kept decoded across the runs of one `assess score`


def _needs(existing: Any, metric: SampleMetric, force: bool) -> bool:
    if force or existing is None or existing["value"] is None:
        return True
    return existing["metric_version"] != metric.spec.version or existing["config"] != metric.config


def _plan(index: Index, run: RunDir, metrics: list[SampleMetric], force: bool, stale: frozenset[Key] = frozenset()
          ) -> tuple[dict[str, set[Key]], int]:
    """metric name -> the (text identity, seed) that need it (every metric of a `stale` sample: its image is not the
    one scored); and how many scores are already current."""
    existing = index.existing_scores(run.cell_key)
    todo: dict[str, set[Key]] = {}
    current = 0
    for metric in metrics:
        if metric.spec.needs_reference and run.is_anchor:
            continue  # the anchor is the reference: nothing to compare it with
        if not metric.spec.applies_to(run.cell):
            continue  # a metric made for another model (the shapes checker on a FLUX model): not scored, not reported
        scored = [s for s in run.samples if (s.frames or not metric.spec.clips_only)  # temporal: clips only
                  and (not metric.spec.text_prompts_only or quoted_text(s.prompt) is not None)]  # OCR: text prompts
        keys = {(s.text_id, s.seed) for s in scored
                if (s.text_id, s.seed) in stale or _needs(existing.get((s.text_id, s.seed, metric.spec.name)), metric, force)}
        current += len(scored) - len(keys)
        if keys:
            todo[metric.spec.name] = keys
    return todo, current


class ImageCache:
    """Decoded anchor images (or why they are unreadable), dropped when over max_bytes."""

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = CACHE_BYTES if max_bytes is None else max_bytes
        self.items: dict[Path, Any] = {}
        self.size = 0
        # the anchor runs' records and their files' checks, read once per `assess score`, not once per cell
        self.records: dict[Path, dict[tuple[str, int], SampleRecord]] = {}
        self.problems: dict[Path, str] = {}
        self.checked: dict[tuple[Path, str, int], str | None] = {}
        self.anchor_rows: dict[str, dict[tuple[str, int], Any]] = {}  # anchor cell key -> its sample rows

    def get(self, path: Path) -> Any:
        if path not in self.items:
            image: np.ndarray | str
            try:
                image = read_image(path)
            except OSError as exc:
                image = f"anchor image unreadable ({path}): {exc}"
            size = getattr(image, "nbytes", 0)
            if self.size + size > self.max_bytes:
                self.items.clear()
                self.size = 0
            self.items[path] = image
            self.size += size
        return self.items[path]


class _References:
    """The anchor's samples of one run's cell, matched by (anchor cell key, text identity, seed), never by prompt
    id: a manifest that kept an id for another text is compared with the anchor of that text."""

    def __init__(self, index: Index, run: RunDir, cache: ImageCache) -> None:
        self.run = run
        if run.anchor_cell_key not in cache.anchor_rows:  # the anchors are ingested before any cell is scored
            cache.anchor_rows[run.anchor_cell_key] = index.cell_samples(run.anchor_cell_key)
        self.rows = cache.anchor_rows[run.anchor_cell_key]
        self.cache = cache
        missing = [s.seed for s in run.samples if (s.text_id, s.seed) not in self.rows]
        self.command = render_command(run, missing) if missing else ""
        self.anchor_records = cache.records
        self.anchor_problems = cache.problems

    def get(self, sample: SampleRecord) -> tuple[Any, str | None]:
        """The anchor's image of the sample, decoded (cached), or why there is none."""
        found, problem = self.locate(sample)
        if found is None:
            return None, problem
        image = self.cache.get(found[0])
        return (None, image) if isinstance(image, str) else (image, None)

    def locate(self, sample: SampleRecord) -> tuple[tuple[Path, SampleRecord] | None, str | None]:
        """The anchor sample's verified file and record (a clip is streamed from it: assess.metrics.frames), or why not."""
        row = self.rows.get((sample.text_id, sample.seed))
        if row is None:
            return None, (
                f"anchor sample missing (cell {self.run.anchor_cell_key}, prompt {sample.prompt_id}, "
                f"seed {sample.seed}); render it with: {self.command}"
            )
        problem = self._mismatch(Path(row["run_path"]), sample)
        if problem:
            return None, f"anchor image does not match its record: {problem}"
        try:
            path = contained(row["run_path"], row["image"], "anchor image")
        except OSError as exc:
            return None, f"anchor image unreadable: {exc}"
        return (path, self.anchor_records[Path(row["run_path"])][(sample.text_id, sample.seed)]), None

    def _mismatch(self, run_path: Path, sample: SampleRecord) -> str | None:
        """Why the anchor's file for this sample is not the one its record describes (content hash), if it is not."""
        if run_path not in self.anchor_records:
            try:
                self.anchor_records[run_path] = {(r.text_id, r.seed): r for r in load_run(run_path).samples}
            except RunDirError as exc:
                self.anchor_records[run_path] = {}
                self.anchor_problems[run_path] = str(exc)
        record = self.anchor_records[run_path].get((sample.text_id, sample.seed))
        if record is None:
            return self.anchor_problems.get(run_path, f"{run_path} no longer records this sample")
        key = (run_path, record.text_id, record.seed)
        if key not in self.cache.checked:
            self.cache.checked[key] = mismatch(run_path, record)
        return self.cache.checked[key]


def _load(run: RunDir, samples: list[SampleRecord], references: _References | None
          ) -> tuple[dict[Key, SampleInput], dict[Key, str]]:
    """The samples' images (and their anchors'), or why an image is unreadable."""
    inputs: dict[Key, SampleInput] = {}
    unreadable: dict[Key, str] = {}
    for sample in samples:
        key = (sample.text_id, sample.seed)
        problem = mismatch(run.path, sample)
        if problem:
            unreadable[key] = f"image does not match its record: {problem}"
            continue
        try:
            image = read_image(run.image_path(sample))
        except OSError as exc:
            unreadable[key] = f"image unreadable: {exc}"
            continue
        item = SampleInput(prompt_id=sample.prompt_id, seed=sample.seed, image=image, prompt=sample.prompt)
        if references is not None:
            item.reference, item.reference_missing = references.get(sample)
        inputs[key] = item
    return inputs, unreadable


def _compute(run: RunDir, metric: SampleMetric, samples: list[SampleRecord], inputs: dict[Key, SampleInput],
             unreadable: dict[Key, str]) -> list[ScoreRow]:
    readable = [s for s in samples if (s.text_id, s.seed) in inputs]
    outcomes = metric.score([inputs[(s.text_id, s.seed)] for s in readable])
    pairs = list(zip(readable, outcomes, strict=True))
    pairs += [(s, Outcome.unavailable(unreadable[(s.text_id, s.seed)]))
              for s in samples if (s.text_id, s.seed) in unreadable]
    reference = run.anchor_cell_key if metric.spec.needs_reference else None
    return [ScoreRow(s.cell_key, s.text_id, s.prompt_id, s.seed, metric.spec, o, metric.config, reference)
            for s, o in pairs]


def _score_clip(run: RunDir, sample: SampleRecord, metrics: list[SampleMetric], todo: dict[str, set[Key]],
                references: _References | None, flags: dict[tuple[str, str, int], str | None],
                summary: ScoreSummary) -> list[ScoreRow]:
    """One clip sample's score rows: each metric over its frames, streamed (assess.metrics.frames)."""
    from assess.metrics.frames import score_clip

    key = (sample.text_id, sample.seed)
    wanted = [m for m in metrics if key in todo.get(m.spec.name, set())]
    problem = mismatch(run.path, sample)
    if problem is None:
        try:
            path = run.image_path(sample)
        except OSError as exc:
            problem = str(exc)
    if problem is not None:
        outcomes = {m.spec.name: Outcome.unavailable(f"image does not match its record: {problem}") for m in wanted}
    else:
        anchor, missing = references.locate(sample) if references is not None else (None, None)
        outcomes = score_clip(path, sample, wanted, anchor, missing)
        problem = next((o.unavailable_reason for o in outcomes.values()  # this clip's file, not its anchor's
                        if o.unavailable_reason and o.unavailable_reason.startswith(f"image unreadable: {path}")), None)
    flags[(run.cell_key, *key)] = problem
    if problem is not None:
        summary.flagged.append(f"{run.path / sample.image}: {problem}")
    return [ScoreRow(sample.cell_key, sample.text_id, sample.prompt_id, sample.seed, m.spec, outcomes[m.spec.name],
                     m.config, run.anchor_cell_key if m.spec.needs_reference else None) for m in wanted]


REWRITE_SLACK_S = 0.02  # a ctime lags the clock a stamp is read from by up to a tick of the kernel's coarse clock


def written_since(run: RunDir, since: str | None) -> list[SampleRecord]:
    """The samples whose image file was written after `since` (when the run's last scoring took its stamp; ctime, which
    no user call sets back): only in a run whose stamp changed."""
    if since is None:
        return []
    after = datetime.fromisoformat(since).timestamp() - REWRITE_SLACK_S
    found = []
    for sample in run.samples:
        try:
            written = run.image_path(sample).stat().st_ctime
        except OSError:
            continue  # missing or outside the folder: ingest flags it
        if written >= after:
            found.append(sample)
    return found


def score_run(index: Index, run: RunDir, metrics: list[SampleMetric], summary: ScoreSummary,
              force: bool = False, cache: ImageCache | None = None, stale: frozenset[Key] = frozenset(),
              refresh: bool = True) -> None:
    """Compute and write the sample metrics of one (already ingested) run, CHUNK samples at a time; the `stale`
    samples (their image, or their anchor's, was rewritten since the last scoring: `rewritten`, `compared_with`) are
    scored again whatever their scores, as a fresh index scores them."""
    todo, current = _plan(index, run, metrics, force, stale)
    summary.current += current
    needed = [s for s in run.samples if any((s.text_id, s.seed) in keys for keys in todo.values())]
    wants_reference = any(m.spec.needs_reference and m.spec.name in todo for m in metrics)
    references = _References(index, run, cache or ImageCache()) if wants_reference else None
    rows: list[ScoreRow] = []
    flags: dict[tuple[str, str, int], str | None] = {}
    for sample in (s for s in needed if s.frames):
        rows += _score_clip(run, sample, metrics, todo, references, flags, summary)
    needed = [s for s in needed if not s.frames]  # images: CHUNK samples decoded at once
    for start in range(0, len(needed), CHUNK):
        chunk = needed[start : start + CHUNK]
        inputs, unreadable = _load(run, chunk, references)
        for metric in metrics:
            keys = todo.get(metric.spec.name, set())
            samples = [s for s in chunk if (s.text_id, s.seed) in keys]
            if samples:
                rows += _compute(run, metric, samples, inputs, unreadable)
        flags.update({(run.cell_key, *key): None for key in inputs})
        flags.update({(run.cell_key, *key): problem for key, problem in unreadable.items()})
        summary.flagged += [f"{run.path / s.image}: {unreadable[(s.text_id, s.seed)]}"
                            for s in chunk if (s.text_id, s.seed) in unreadable]
    twin = run.twin_key
    done = set() if force or twin is None else stored_parity(index.parity(run.cell_key), twin)
    parity = parity_rows(run, index.cell_samples(twin) if twin else {}, read_image, done)
    with index.write() as conn:
        index.drop_scores(conn, run.cell_key, [m.spec.name for m in metrics if not m.spec.applies_to(run.cell)])
        index.write_scores(conn, [r for r in rows if (r.prompt_sha, r.seed) not in stale], force=force)
        index.write_scores(conn, [r for r in rows if (r.prompt_sha, r.seed) in stale], force=True)  # replace the old image's
        index.write_parity(conn, parity)  # a parallel cell against its width-1 twin (assess.statistics.parity)
        index.flag_samples(conn, flags)
        if refresh:
            index.refresh_cell(conn, run.cell_key)
    summary.written += len(rows)
    summary.unavailable.update(("parallel_drift", r["unavailable_reason"]) for r in parity if r["unavailable_reason"])
    summary.unavailable.update((r.spec.name, r.outcome.unavailable_reason) for r in rows
                               if r.outcome.unavailable_reason is not None)


Progress = Callable[[int, int], None]  # (run folders done, run folders in all)

# What a scoring of a run leaves, by version: a change to it voids every recorded stamp (assess.index.database run_files).
SCORE_PLAN_VERSION = 1


def plan_digest(metrics: list[SampleMetric]) -> str:
    """The identity of what a scoring computes for a run: each sample metric's name, version and configuration."""
    plan = [SCORE_PLAN_VERSION, sorted((m.spec.name, m.spec.version, m.config) for m in metrics)]
    return hashlib.blake2b(json_dumps(plan).encode(), digest_size=16).hexdigest()


@dataclass
class Touched:
    """The cells a scoring changed, each refreshed once when it ends (Index.refresh_cell reads every run and sample of
    the cell: twice per run, a cell that 5,000 runs share cost the square of its runs), with the `run_files` rows of
    its runs, recorded in the same transaction: a scoring stopped before leaves them unrecorded, so the next one reads
    those runs again and refreshes their cells."""

    run_files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # cell key -> its runs' rows

    def touch(self, cell_key: str) -> None:
        self.run_files.setdefault(cell_key, [])

    def refresh(self, index: Index, summary: ScoreSummary) -> None:
        for cell_key, rows in sorted(self.run_files.items()):
            try:
                with index.write() as conn:
                    index.refresh_cell(conn, cell_key)
                    for row in rows:
                        index.record_run_file(conn, row)
            except Exception as error:  # noqa: BLE001 - as _guarded: one cell never blocks the others
                if disk_full(error, index.path):
                    raise
                summary.failed += [f"{row['path']}: {type(error).__name__}: {error}" for row in rows] or [
                    f"cell {cell_key}: {type(error).__name__}: {error}"]
        self.run_files.clear()


@dataclass
class _Found:
    """The run folders a scoring looks at: those to read (with their stamps), those already indexed as they are."""

    stamps: dict[Path, str] = field(default_factory=dict)  # every folder seen -> its content stamp
    changed: list[Path] = field(default_factory=list)
    cells: set[tuple[str, str, str]] = field(default_factory=set)  # (cell key, split, anchor key) of non-anchor runs
    anchor_dirs: set[Path] = field(default_factory=set)
    seen_at: dict[Path, str] = field(default_factory=dict)  # a changed folder -> when its last scoring took its stamp
    counted: dict[Path, dict[str, Any]] = field(default_factory=dict)  # a folder counted from its run_files row
    stamped_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())  # this scoring's stamps


def _skip_or_read(index: Index, folders: Sequence[Path], found: _Found, plan: str, force: bool,
                  summary: ScoreSummary) -> None:
    """Stamp each new folder; one whose stamp, plan and completeness the index recorded is counted as scored from
    its `run_files` row (its samples are not read), the others are queued to be read."""
    new = [f for f in folders if f not in found.stamps]
    found.stamps.update((f, content_stamp(f)) for f in new)
    stored = {} if force else index.run_files([str(f) for f in new])
    for folder in new:
        row = stored.get(str(folder))
        if row is None or row["stamp"] != found.stamps[folder] or row["plan"] != plan or not row["complete"]:
            found.changed.append(folder)
            if row is not None:
                found.seen_at[folder] = row["scored_at"]
            continue
        _count(summary, row, 1)
        found.counted[folder] = row
        if not row["is_anchor"]:
            found.cells.add((row["cell_key"], row["split"], row["anchor_cell_key"]))
        if row["anchor_dir"]:
            found.anchor_dirs.add(Path(row["anchor_dir"]))


def _count(summary: ScoreSummary, row: dict[str, Any], sign: int) -> None:
    """Count (sign 1) a run folder scored as its `run_files` row says, or take it back (-1: it is read after all)."""
    summary.runs += sign
    summary.samples += sign * row["n_samples"]
    summary.current += sign * row["n_scores"]
    for problem in json.loads(row["problems"] or "[]"):
        summary.problems.append(problem) if sign > 0 else summary.problems.remove(problem)


def _heads(folders: Sequence[Path], failed: list[str]) -> list[RunDir]:
    """The folders' run.json alone (no sample read), as RunDirs without samples: enough to order them."""
    heads = []
    for folder in folders:
        try:
            heads.append(RunDir(folder, read_run_record(folder), [], None))
        except (RunDirError, OSError, ValueError) as error:
            failed.append(f"{folder}: {type(error).__name__}: {error}")
    return heads


def _plan_runs(index: Index, paths: Sequence[Path], plan: str, force: bool, summary: ScoreSummary) -> tuple[
        list[RunDir], _Found]:
    """What to read, in order (anchors first, then the cells, parallel cells after their width-1 twins), with the
    anchor runs the runs' run.json name and the parallel runs' twins (render.rundir.walk.load_runs' with_anchors);
    the runs whose stamp is recorded are counted in `summary` and not read."""
    found = _Found()
    _skip_or_read(index, paths, found, plan, force, summary)
    heads = _heads(found.changed, summary.failed)
    found.anchor_dirs |= {h.anchor_dir for h in heads if not h.is_anchor and h.anchor_dir is not None}
    anchors = [p.resolve() for folder in sorted(found.anchor_dirs) if folder.is_dir() for p in iter_run_dirs(folder)]
    more = len(found.changed)
    _skip_or_read(index, anchors, found, plan, force, summary)
    heads += _heads(found.changed[more:], summary.failed)
    more = len(found.changed)
    _skip_or_read(index, twin_dirs(heads), found, plan, force, summary)
    heads += _heads(found.changed[more:], summary.failed)
    found.cells |= {(h.cell_key, h.split, h.anchor_cell_key) for h in heads if not h.is_anchor}
    return sorted(heads, key=lambda h: (not h.is_anchor, h.twin_key is not None, str(h.path))), found


def score(paths: Sequence[Path | str], index_path: Path | str | None = None, metrics: list[str] | None = None,
          clip_model: str | None = None, force: bool = False, log: Log | None = None,
          metric_models: dict[str, str] | None = None, progress: Progress | None = None) -> ScoreSummary:
    """Score every run directory under `paths` (runs, sweeps, or any folder holding them; an output root
    with the run folders it registered elsewhere).

    The anchor runs the runs' run.json name (anchor.dir, kept by the renderer outside the sweep)
    are scored with them. A path that is not a run directory, or a sweep without runs, raises before
    the index is opened. A run that cannot be read or indexed is named in `summary.failed` and the
    others are scored all the same.

    What is already indexed is not read again: a run folder whose content stamp (render.rundir.walk.content_stamp),
    metrics and complete scores the index recorded when it last scored it is counted from that record. The others
    are read, indexed and scored one at a time (anchors first), so memory holds one run's samples, not the root's.
    `progress` is told (done, total) run folders as it goes.
    """
    folders = list(dict.fromkeys(p for path in paths for p in run_dirs_under(path)))
    sample_metrics, set_metrics = build_metrics(metrics, clip_model, metric_models)
    summary = ScoreSummary()
    plan = plan_digest(sample_metrics)
    path = Path(index_path) if index_path is not None else default_index_path()
    created = not path.exists()
    with Index.open(path) as index:
        index.sync_metric_catalogue()
        heads, found = _plan_runs(index, folders, plan, force, summary)
        total, cache, touched = len(found.stamps), ImageCache(), Touched()
        # the anchors are read first: the cells compared with an anchor image written since its last scoring (a
        # rewrite in place, or the file put back) are then scored again on those samples, read or not otherwise
        anchors, cells = [h.path for h in heads if h.is_anchor], [h.path for h in heads if not h.is_anchor]
        written: dict[str, set[Key]] = {}  # anchor cell key -> its samples whose image was written since
        compared: dict[Path, set[Key]] = {}  # a run folder -> its samples compared with one of those
        done = total - len(heads)

        def one(folder: Path) -> None:
            nonlocal done
            done += 1
            _score_one(index, folder, (found.stamps[folder], found.stamped_at, found.seen_at.get(folder)), plan,
                       sample_metrics, summary, force, cache, log, touched,
                       Rescore(frozenset(compared.get(folder, ())), written))
            if progress:
                progress(done, total)

        for folder in anchors:
            one(folder)
        compared = index.compared_with(written) if written else {}
        more = [folder for folder in compared if folder not in set(cells)]  # outside the paths, or current
        for folder in more:
            found.stamps.setdefault(folder, content_stamp(folder))
            if folder in found.counted:  # counted as current: it is read after all
                _count(summary, found.counted.pop(folder), -1)
            else:
                total += 1
        for folder in [*cells, *more]:
            one(folder)
        # a set score reads every anchor image it pairs: each against an anchor written since is scored again
        reread = index.sets_against(set(written)) if written else set()
        found.cells |= index.cells_of_runs([str(folder) for folder in more]) | reread
        if progress and not heads:
            progress(total, total)
        if set_metrics:
            score_sets(index, found.cells, set_metrics, summary, read=read_image, force=force, touched=touched,
                       stale={cell for cell, _, _ in reread})
        touched.refresh(index, summary)
    if created and not summary.runs:
        remove_if_empty(path)  # nothing indexed, no index file
    return summary


@dataclass(frozen=True)
class Rescore:
    """What a scoring of one run scores again whatever its scores say, and what it tells the later runs."""

    compared: frozenset[Key] = frozenset()  # its samples compared with an anchor image written since its last scoring
    written: dict[str, set[Key]] | None = None  # an anchor run adds its samples whose image was written since


def _score_one(index: Index, folder: Path, stamped: tuple[str, str, str | None], plan: str,
               metrics: list[SampleMetric], summary: ScoreSummary, force: bool, cache: ImageCache, log: Log | None,
               touched: Touched, rescore: Rescore = Rescore()) -> None:
    """Read one run folder, index it, score it, and record its stamp (with when it was taken) and what the scoring
    left. `stamped`: (its stamp now, when this scoring took it, when the last scoring took its own, if any). A sample
    whose image was written since (`written_since`) and no longer matches its record is scored again (as unavailable,
    as a fresh index scores it), and so is each sample `rescore` names."""
    stamp, stamped_at, seen_at = stamped
    try:
        run = load_run(folder)
    except (RunDirError, OSError, ValueError) as error:
        summary.failed.append(f"{folder}: {type(error).__name__}: {error}")
        return
    summary.problems += run.problems
    if not _guarded(summary, run, functools.partial(ingest_run, index, run, refresh=False), index):
        return
    touched.touch(run.cell_key)
    if log:
        log(f"scoring {run.path} ({len(run.samples)} samples)")
    before = (summary.written + summary.current, sum(summary.unavailable.values()), len(summary.flagged))
    since = [] if force else written_since(run, seen_at)
    if run.is_anchor and since and rescore.written is not None:
        rescore.written.setdefault(run.cell_key, set()).update((s.text_id, s.seed) for s in since)
    stale = frozenset((s.text_id, s.seed) for s in since if mismatch(run.path, s) is not None) | rescore.compared
    if not _guarded(summary, run, functools.partial(score_run, index, run, metrics, summary, force=force, cache=cache,
                                                   stale=stale, refresh=False),
                    index):
        return
    summary.runs += 1
    summary.samples += len(run.samples)
    complete = (sum(summary.unavailable.values()), len(summary.flagged)) == before[1:]
    anchor_dir = run.anchor_dir if not run.is_anchor else None
    touched.run_files[run.cell_key].append({  # recorded with the cell's refresh (Touched)
        "path": str(run.path), "stamp": stamp, "plan": plan, "complete": int(complete),
        "n_samples": len(run.samples), "n_scores": summary.written + summary.current - before[0],
        "anchor_dir": str(anchor_dir) if anchor_dir else None, "scored_at": stamped_at})


def _guarded(summary: ScoreSummary, run: RunDir, step: Callable[[], None], index: Index | None = None) -> bool:
    """Run one run's step; a failure (a value sqlite cannot store, a file that breaks while read) is named in
    the summary and the other runs go on. The step's transaction is rolled back by Index.write."""
    try:
        step()
    except Exception as error:  # noqa: BLE001 - one bad run never blocks the others; it is reported
        if disk_full(error, index.path if index is not None else None):  # ... but a full disk blocks them all: one line (assess.cli), the index as it was
            raise
        summary.failed.append(f"{run.path}: {type(error).__name__}: {error}")
        return False
    return True
