"""Time contenders side by side: one process, one device, each pipeline loaded and warmed once, interleaved rounds.

A speed-up of two cells rendered in different processes, hours or GPUs carries the error between those runs, which
no interval over one run's samples can see (docs/timing.md). Here every contender gets its own loaded pipeline,
configured for its cell once (hooks and compile are never re-applied between calls), and warmed up; then, in each
round, every contender renders the same recorded sample once, in an order shuffled per round (so neither a trend
of the machine nor a contender's place in the round favours one side). A speed-up comes from the rounds: each
round pairs the contenders in time and in prompt.

Each contender's first output of each sample is checked against the recorded image's sha256 (outside the timed
call), so what is timed is what was judged; a deterministic cell that renders other bytes is reported as such.
No image is written. The session is recorded in each contender's run directory (render.rundir.session_log).

A parallel contender (width N, render.axes.parallel) is timed with its ranks, as it rendered: this process is its
rank 0 and starts the others (render.run.ranks.team) for the session; its calls are announced to them, the width-1
contenders' are not. A process joins one process group, so a session holds one parallel contender at most.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from render import axes
from render.run import ranks
from render.cell import Job
from render.errors import RenderError
from render.run.loader import LoadedPipeline, call_kwargs, configure, load_pipeline
from render.run.provenance import device_info
from render.rundir import RunDir, digest, now_iso
from render.rundir.session_log import ContenderTiming, TimingSession, record_session
from render.run.runner import png_bytes, timed_batch, timed_call

log = logging.getLogger("render")

MIN_ROUNDS = 6  # the fewest rounds that give a 95 % distribution-free interval of the median ratio (assess.statistics.side_by_side)


class RetimeError(RenderError, ValueError):
    """The contenders cannot be timed side by side (nothing in common, a bad count)."""


class DroppedOut(RenderError):  # noqa: N818 - a contender's state, not an error of the session
    """A contender failed in a way it has recorded itself (an interleaved sweep's cell, render.timing.interleave): the
    session goes on without it."""


@dataclass(frozen=True)
class Sample:
    """A recorded sample a contender is timed on: its text (what the model receives), seed and image digest."""

    text_id: str
    text: str
    seed: int
    sha256: str | None


@dataclass
class Contender:
    """A cell to time: its job (the cell as rebuilt from its run directory), where it was judged, its samples."""

    job: Job
    run_dir: Path
    samples: dict[tuple[str, int], Sample]  # (text identity, seed) -> sample
    loaded: LoadedPipeline | None = None
    latencies: list[float] = field(default_factory=list)
    load_s: float = 0.0
    warmup_calls: int = 0
    checked: dict[tuple[str, int], bool | None] = field(default_factory=dict)  # sample -> matched (None: no digest)
    dropped: bool = False  # it failed during the session (DroppedOut): left out of the rounds after, and the record

    def prepare(self, first: Sample, warmups: int | None) -> float:
        """Load and configure its own pipeline, then its warm-up calls; the device seconds it took."""
        return _prepare(self, first, warmups)

    def call(self, sample: Sample) -> float:
        """One timed call of a round (its output checked against the recorded image); its seconds."""
        pixels, took = _call(self, sample)
        _check(self, sample, pixels)
        return took

    def timing(self) -> ContenderTiming:
        values = list(self.checked.values())
        return ContenderTiming(self.job.cell.key, str(self.run_dir), tuple(round(x, 6) for x in self.latencies),
                               self.warmup_calls, round(self.load_s, 4), matched=values.count(True),
                               differed=values.count(False), unchecked=values.count(None))


class _Forget:
    """What a team clears on leaving: the parallel contender's pipeline, whose mesh dies with the process group."""

    def __init__(self, contender: Contender) -> None:
        self.contender = contender

    def clear(self) -> None:
        self.contender.loaded = None


def contenders_of(runs: Sequence[RunDir], job_of: Callable[[RunDir], Job]) -> dict[str, Contender]:
    """cell key -> Contender, one per distinct cell of `runs` with recorded samples (gathered over its runs, the
    fullest run first); `job_of` rebuilds a cell's job from one of its runs."""
    by_cell: dict[str, list[RunDir]] = {}
    for run in runs:
        by_cell.setdefault(run.cell_key, []).append(run)
    out = {}
    for key, group in by_cell.items():
        group.sort(key=lambda r: (-len(r.samples), str(r.path)))
        samples: dict[tuple[str, int], Sample] = {}
        for run in group:
            for s in run.samples:
                if s.prompt is not None and (s.text_id, s.seed) not in samples:
                    samples[(s.text_id, s.seed)] = Sample(s.text_id, s.prompt, s.seed, s.sha256)
        if samples:
            out[key] = Contender(job_of(group[0]), group[0].path, samples)
    return out


def check_widths(contenders: Sequence[Contender], device: str) -> Contender | None:
    """The session's parallel contender (None: none is); RetimeError for two, or one wider than the machine."""
    from render.axes.parallel import machine_width

    wide = [c for c in contenders if c.job.gpus > 1]
    if len(wide) > 1:
        raise RetimeError(f"{len(wide)} parallel cells in one session ({', '.join(c.job.cell.key[:12] for c in wide)}): "
                          "a process leads one parallel cell's ranks at a time; time them in separate sessions "
                          "(--pairwise, each against its anchor)")
    if not wide:
        return None
    gpus = machine_width("cpu" if device == "cpu" else "cuda")
    if gpus is not None and wide[0].job.gpus > gpus:
        raise RetimeError(f"cell {wide[0].job.cell.key[:12]} is {wide[0].job.gpus} GPUs wide and this machine has "
                          f"{gpus}: retime it where it rendered")
    return wide[0]


def shared_samples(contenders: Sequence[Contender]) -> list[Sample]:
    """The samples every contender has, in the first contender's order."""
    first, *rest = contenders
    return [s for key, s in first.samples.items() if all(key in c.samples for c in rest)]


def _call(contender: Contender, sample: Sample) -> tuple[object, float]:
    """One timed call of the sample; a batched cell's is timed as it renders, a full call (the sample in every slot,
    each with its own generator seeded alike): the first image, and the call's seconds (every image's latency)."""
    assert contender.loaded is not None
    job = contender.job
    if job.cell.batch > 1:
        size = job.cell.batch
        pixels, seconds = timed_batch(contender.loaded, job.cell, job.device, [sample.text] * size, [sample.seed] * size)
        return pixels[0], seconds
    return timed_call(contender.loaded, job.cell, job.device, sample.text, sample.seed)


def _prepare(contender: Contender, first: Sample, warmups: int | None) -> float:
    """Load and configure the contender's own pipeline, then its warm-up calls; the device seconds it took (times
    its width)."""
    job = contender.job
    start = time.perf_counter()
    loaded = load_pipeline(job.cell.model, job.device, axes.load_options(job.cell))

    def calibrate() -> None:  # MagCache without ratios: one full render with the cell's settings
        ranks.lead(job.cell.key, first.text, first.seed)
        loaded.pipe(**call_kwargs(job.cell, first.text, first.seed))

    configure(loaded, job.cell, calibrate)
    contender.loaded, contender.load_s = loaded, time.perf_counter() - start
    return contender.load_s * job.gpus + warm_up(contender, first, warmups)


def warm_up(contender: Contender, first: Sample, warmups: int | None) -> float:
    """The contender's warm-up calls on its loaded pipeline (`warmups`, default what its cell needs); their device
    seconds."""
    job = contender.job
    calls = max(1, warmups if warmups is not None else axes.default_warmups(job.cell))
    spent = 0.0
    for _ in range(calls):
        _, seconds = _call(contender, first)
        spent += seconds
    contender.warmup_calls = calls
    return spent * job.gpus  # device seconds: a parallel contender holds its width


def _check(contender: Contender, sample: Sample, pixels: object) -> None:
    """Compare the contender's output of a sample with the recorded image, once per sample (outside the timing)."""
    key = (sample.text_id, sample.seed)
    if key in contender.checked:
        return
    recorded = contender.samples[key].sha256
    contender.checked[key] = None if recorded is None else digest(png_bytes(pixels, "a timed call", contender.job.cell.model.fps)) == recorded


def retime(contenders: Sequence[Contender], *, rounds: int, seconds: float | None = None, seed: int = 0,
           warmups: int | None = None, purpose: str = "retime", experiment: str | None = None,
           record: bool = True, progress: Callable[[int, int], None] | None = None,
           session_seconds: float | None = None,
           recorded: Callable[[TimingSession], None] | None = None) -> TimingSession:
    """Time `contenders` side by side (module doc) for `rounds` rounds, or fewer once `seconds` of rounds (or
    `session_seconds` of the whole session, its loads and warm-ups included) have passed, never fewer than
    MIN_ROUNDS; record the session in their run directories unless `record` is off, then hand it to `recorded` (the
    index). A stop (a signal, an error) after some rounds records the rounds done, marked incomplete, then goes on."""
    if len(contenders) < 2:
        raise RetimeError(f"{len(contenders)} contender(s): side-by-side timing needs at least two cells")
    if rounds < MIN_ROUNDS:
        raise RetimeError(f"rounds={rounds}: at least {MIN_ROUNDS} rounds are needed for an interval")
    devices = {c.job.device for c in contenders}
    if len(devices) != 1:
        raise RetimeError(f"contenders on {', '.join(sorted(devices))}: side by side means one device")
    samples = shared_samples(contenders)
    if not samples:
        raise RetimeError("the contenders share no recorded sample (the same prompt text and seed): render them on "
                          "the same prompts and seeds first")
    device = devices.pop()
    wide = check_widths(contenders, device)
    started, spent, opened = now_iso(), 0.0, time.perf_counter()
    with ranks.team(wide.job, wide.job.gpus, _Forget(wide)) if wide else contextlib.nullcontext():
        for contender in contenders:
            try:
                spent += contender.prepare(samples[0], warmups)
            except DroppedOut:
                contender.dropped = True
        rng = random.Random(seed)
        timed: list[tuple[str, int]] = []
        orders: list[tuple[int, ...]] = []
        complete, begin = False, time.perf_counter()
        try:
            for number in range(rounds):
                sample = samples[number % len(samples)]
                order = list(range(len(contenders)))
                rng.shuffle(order)
                for i in order:
                    if contenders[i].dropped:
                        continue
                    try:
                        took = contenders[i].call(sample)
                    except DroppedOut:
                        contenders[i].dropped = True
                        continue
                    contenders[i].latencies.append(took)
                    spent += took * contenders[i].job.gpus
                timed.append((sample.text_id, sample.seed))
                orders.append(tuple(order))
                if progress:
                    progress(number + 1, rounds)
                now = time.perf_counter()
                if number + 1 >= MIN_ROUNDS and ((seconds is not None and now - begin >= seconds)
                                                 or (session_seconds is not None and now - opened >= session_seconds)):
                    break
            complete = True
        finally:
            done = len(timed)
            for c in contenders:
                del c.latencies[done:]  # a round cut short counts for nobody
            kept = [i for i, c in enumerate(contenders) if not c.dropped]
            renumber = {old: new for new, old in enumerate(kept)}
            session = TimingSession(
                session=secrets.token_hex(8), started_at=started, finished_at=now_iso(), device=device,
                device_name=str(device_info(device).get("name")), host=socket.gethostname(), pid=os.getpid(),
                samples=tuple(timed), orders=tuple(tuple(renumber[i] for i in o if i in renumber) for o in orders),
                contenders=tuple(contenders[i].timing() for i in kept), device_s=round(spent, 4), complete=complete,
                purpose=purpose, experiment=experiment)
            for c in contenders:
                c.loaded = None  # free the pipelines: a caller timing another set loads its own
            if record and len(kept) >= 2 and (done or not complete):
                record_session(session)
                if recorded:
                    recorded(session)
            spend(contenders, session)
    return session


def spend(contenders: Sequence[Contender], session: TimingSession) -> None:
    """The session's device time, in the spend log of the experiment its cells belong to (the first that does):
    timing is device work like rendering (render.laws.spend)."""
    from render.laws.spend import Purpose, ledger_of, record_spend

    target = next((t for c in contenders if (t := ledger_of(c.job)) is not None), None)
    if target is not None and session.device_s:
        record_spend(target[0], session.device_s, Purpose.RETIME, rid=target[1])
