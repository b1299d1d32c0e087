"""A sweep whose renders are its side-by-side timing: the in-process launcher's cells rendered in interleaved rounds.

Timing a sweep's cells after it (render.timing.sweep_round) renders every cell again: on a small sweep that costs more
than the sweep. Here the in-process launcher opens every cell first (run.json, what exists is linked), gives each
its own pipeline, loaded, configured and warmed up once (render.timing.sessions's warm-ups), then renders the sweep's samples
in rounds: in each round every cell and their anchor render the same sample once, in an order shuffled per round.
The latencies the cells record are then a side-by-side session (render.timing.sessions), recorded in their timings.jsonl
like `assess retime`'s. The samples some cell still has to render lead the rounds, one round each; with fewer than
render.timing.sessions.MIN_ROUNDS of them (a small sweep, a resumed one), the rounds go on with timed calls of samples
already written (checked against them, nothing written); an anchor whose samples exist is timed on them the same
way. What this adds to the sweep: each pipeline's load beyond the one of each kind a sweep makes anyway, the
warm-up calls, those extra rounds and the existing anchor's calls (the sweep's last line says it; docs/timing.md).

Which cells: those the sweep's round would time (render.timing.sweep_round.skip_reason: not an experiment's, not with
`timing.side_by_side=false`), with an anchor to be timed against, of width 1 and batch 1, and on a GPU only while their
pipelines fit in it together (the model's weights on disk, one copy per cell). The others render one after another
as ever, and the round after the sweep times what is left. A cell that fails in a round records its FAILED.json and leaves the rounds; a cancellation
records `cancelled` in every cell still open.
"""

from __future__ import annotations

import functools
import logging
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from render.axes import load_options
from render.cell import Job, anchor_job
from render.run.loader import PIPELINES, PipelineCache, model_source
from render.timing.sessions import MIN_ROUNDS, Contender, DroppedOut, RetimeError, Sample, retime, warm_up
from render.rundir import SampleStore, sample_text_hash
from render.run.runner import CellRun
from render.timing.sweep_round import PURPOSE, RoundOutcome, skip_reason

log = logging.getLogger("render")

CURRENT: ContextVar[Interleave | None] = ContextVar("hypergrid_interleave", default=None)
FIT = 0.8  # the share of a GPU's memory the cells' weights may take together (activations need the rest)


@dataclass
class Writing(Contender):
    """A contender that writes: an open cell whose pending samples are rendered (and recorded) by its rounds."""

    run: CellRun | None = None
    wanted: dict[tuple[str, int], tuple[str, str, int]] = field(default_factory=dict)  # pending (prompt id, text, seed)
    bar: Any = None
    render_s: float = 0.0  # wall seconds of its written samples: what the sweep would have spent anyway

    def prepare(self, first: Sample, warmups: int | None) -> float:
        assert self.run is not None and self.run.writer is not None
        try:
            start = time.perf_counter()
            loaded = self.run.writer.pipeline()  # its own cache (Interleave.add): loaded and configured once
            self.loaded, self.load_s = loaded, time.perf_counter() - start  # the libraries' first import included
            spent = self.load_s + warm_up(self, first, warmups)
        except Exception as error:
            self.run.fail(error)
            raise DroppedOut(str(error)) from error
        loaded.warmups_left, loaded.fresh = 0, False  # warmed here: every sample of the sweep is a warm one
        return spent

    def call(self, sample: Sample) -> float:
        key = (sample.text_id, sample.seed)
        wanted = self.wanted.pop(key, None)
        if wanted is None:
            return super().call(sample)
        run = self.run
        assert run is not None and run.writer is not None
        rendered, start = run.result.n_rendered, time.perf_counter()
        try:
            with run.store.claim(run.job.cell.key, wanted[1], wanted[2], wait=True):
                run.writer.produce(wanted)
        except Exception as error:
            run.fail(error)
            raise DroppedOut(str(error)) from error
        self.render_s += time.perf_counter() - start
        run.pending.remove(wanted)
        if self.bar is not None:
            self.bar.set_postfix_str(run.label)  # the cell as the user wrote it (steps=8), as a cell's own bar says
            self.bar.update(1)
        if run.result.n_rendered == rendered:  # another process had rendered it: linked, so timed here
            return super().call(sample)
        record = run.writer.records[-1]
        self.samples[key], self.checked[key] = Sample(key[0], wanted[1], wanted[2], record.sha256), True
        return float(record.latency_s or 0.0)


class Interleave:
    """The cells an in-process sweep has opened (render.run.runner.Deferral), rendered by `drive` once all are open."""

    def __init__(self) -> None:
        self.runs: list[CellRun] = []

    def takes(self, job: Job, store: SampleStore) -> bool:
        """Whether the job's cell is rendered in the rounds: the sweep's round would time it, it has an anchor to be
        timed against (rendered in this sweep or recorded), it is of width 1 and batch 1 (a batched cell renders a
        batch a call, not a round's one sample), and it fits (_fits)."""
        has_anchor = job.is_anchor or job.render_anchor or not store.pending(job.anchor.key, job.samples)
        return (skip_reason([job], "inprocess", True) is None and has_anchor and job.gpus == 1 and job.cell.batch == 1
                and self._fits(job))

    def covers(self, cell_key: str, samples: list[tuple[str, str, int]]) -> bool:
        """Whether the cell's missing `samples` are all pending in a run opened here (an anchor another job opened)."""
        opened = {s for run in self.runs if run.job.cell.key == cell_key for s in run.pending}
        return set(samples) <= opened

    def add(self, run: CellRun) -> None:
        assert run.writer is not None
        run.writer.pipelines = PipelineCache()  # a pipeline of its own, configured once for the whole sweep
        self.runs.append(run)

    def _fits(self, job: Job) -> bool:
        """Whether one more pipeline of the job's model fits on its device beside those of the cells open."""
        if not job.device.startswith("cuda"):
            return True
        import torch

        weights = _weights_on_disk(model_source(job.cell.model))
        total = torch.cuda.get_device_properties(torch.device(job.device)).total_memory
        return 0 < weights * (len({r.job.cell.key for r in self.runs}) + 2) < FIT * total

    def drive(self) -> RoundOutcome | None:
        """Render every open cell's samples in interleaved rounds, one session per anchor (module doc), then close
        them; what it did, for the sweep's last line (None: no cell was open)."""
        if not self.runs:
            return None
        from render.run.progress import progress

        PIPELINES.clear()  # the sweep's shared pipeline: each cell now holds its own
        outcome = RoundOutcome(interleaved=True)
        bar = progress(total=sum(len(r.pending) for r in self.runs), desc="samples, interleaved", unit="img")
        try:
            for runs in self._groups().values():
                self._session(runs, outcome, bar)
            for run in self.runs:  # what the rounds left (a cell of its own, a session that could not run)
                self._finish(run)
        except BaseException as error:  # a cancellation: every cell still open records it
            for run in self.runs:
                if not run.ended:
                    run.fail(error)
            raise
        finally:
            bar.close()
            for run in self.runs:
                if run.writer is not None:
                    run.writer.pipelines.clear()
                    run.writer.loaded = None
        return outcome

    def _groups(self) -> dict[tuple[str, tuple[tuple[str, str, int], ...]], list[CellRun]]:
        """The open cells by (anchor, samples): the cells one session times against their anchor."""
        groups: dict[tuple[str, tuple[tuple[str, str, int], ...]], list[CellRun]] = {}
        for run in self.runs:
            groups.setdefault((run.job.anchor.key, tuple(run.job.samples)), []).append(run)
        return groups

    def _session(self, runs: list[CellRun], outcome: RoundOutcome, bar: Any) -> None:
        first: dict[str, CellRun] = {}
        for run in runs:
            first.setdefault(run.job.cell.key, run)  # a cell opened twice: its second folder links the first's
        anchor_key = runs[0].job.anchor.key
        # the samples some cell still has to render lead the rounds: a resumed sweep's rounds write, and time again
        # what exists only to reach the minimum
        pending = {(sample_text_hash(text), seed) for run in first.values() for _, text, seed in run.pending}
        writing = [self._writing(run, bar, pending) for run in first.values()]
        anchor = None if anchor_key in first else _recorded(anchor_job(runs[0].job), runs[0])
        cells = [r for r in first.values() if r.job.cell.key != anchor_key]
        if anchor is None and anchor_key not in first:
            outcome.left_out += [f"{r.label}: its anchor has no samples here" for r in cells]
            return
        contenders: list[Contender] = [*writing, *([anchor] if anchor else [])]
        if len(contenders) < 2 or not cells:
            return
        started = time.perf_counter()
        try:
            session = retime(contenders, rounds=max(len(pending), MIN_ROUNDS), purpose=PURPOSE)
        except RetimeError as error:
            outcome.left_out += [f"{r.label}: {error}" for r in cells]
            return
        except Exception as error:  # noqa: BLE001 - the anchor's timing failed: the cells still render (_finish)
            log.warning("interleaved rounds of %s with their anchor failed: %s: %s", ", ".join(r.label for r in cells),
                        type(error).__name__, error, exc_info=True)
            outcome.left_out += [f"{r.label}: {type(error).__name__}: {error}" for r in cells]
            return
        spent = time.perf_counter() - started
        # what the cells would have cost one after another: their renders, and one load of each kind of pipeline
        # (a sweep's cells share it: render.run.loader.PIPELINES); the rest is what the rounds added
        first_loads: dict[tuple[str, str | None, str], float] = {}
        for w in writing:
            first_loads.setdefault((w.job.cell.model.id, w.job.cell.model.revision, load_options(w.job.cell)), w.load_s)
        outcome.spent_s += max(0.0, spent - sum(w.render_s for w in writing) - sum(first_loads.values()))
        outcome.extra_rounds = max(outcome.extra_rounds, len(session.samples) - len(pending))
        timed = {c.cell_key for c in session.contenders}
        if anchor_key in timed:
            outcome.sessions.append(session)
            outcome.timed += [r.label for r in cells if r.job.cell.key in timed]
            outcome.timed_keys |= {r.job.cell.key for r in cells if r.job.cell.key in timed}
        outcome.left_out += [f"{r.label}: failed during the rounds (its FAILED.json)" for r in cells if r.job.cell.key not in timed
                             and r.result.message]

    @staticmethod
    def _writing(run: CellRun, bar: Any, first: set[tuple[str, int]]) -> Writing:
        """The open cell as a contender: its samples (those in `first` first: render.timing.sessions times them in order),
        the pending ones to be written by its calls."""
        samples, wanted = {}, {}
        for prompt_id, text, seed in sorted(run.job.samples, key=lambda s: (sample_text_hash(s[1]), s[2]) not in first):
            key = (sample_text_hash(text), seed)
            found = run.store.find(run.job.cell.key, prompt_id, text, seed)
            samples[key] = Sample(key[0], text, seed, found.record.sha256 if found else None)
            if (prompt_id, text, seed) in run.pending:
                wanted[key] = (prompt_id, text, seed)
        return Writing(run.job, run.run_dir, samples, run=run, wanted=wanted, bar=bar)

    @staticmethod
    def _finish(run: CellRun) -> None:
        if run.ended:
            return
        try:
            run.fill()
            run.close()
        except Exception as error:  # noqa: BLE001 - one cell's failure is its own; the sweep goes on
            run.fail(error)


@functools.lru_cache(maxsize=8)
def _weights_on_disk(source: str) -> int:
    """The bytes of a local model folder's weight files (0: not a folder), read once per sweep and model."""
    folder = Path(source)
    return sum(f.stat().st_size for f in folder.rglob("*") if f.suffix in {".safetensors", ".bin"}) \
        if folder.is_dir() else 0


def _recorded(job: Job, beside: CellRun) -> Contender | None:
    """The anchor as a timing-only contender, from its recorded samples (None: one of the sweep's is missing)."""
    samples: dict[tuple[str, int], Sample] = {}
    folder = None
    for prompt_id, text, seed in job.samples:
        found = beside.store.find(job.cell.key, prompt_id, text, seed)
        if found is None:
            return None
        folder = folder or found.run_dir
        samples[(sample_text_hash(text), seed)] = Sample(sample_text_hash(text), text, seed, found.record.sha256)
    return Contender(job, folder, samples) if folder is not None else None
