"""The side-by-side round a sweep ends with: its cells and their anchor timed in one process (render.timing.sessions).

A speed-up of two cells rendered by different jobs carries the error between those jobs (docs/timing.md), so a
sweep's render-time figures alone decide nothing on speed. When the sweep's process can time its cells itself (the
in-process and gpus launchers: it runs on the machine that rendered them), it ends with one session per anchor: the
anchor and every finished cell of the sweep measured against it, each pipeline loaded and warmed once, interleaved
rounds, within `timing.side_by_side_share` of the sweep's own time (at least render.timing.sessions.MIN_ROUNDS rounds). The
session is recorded in the run directories (timings.jsonl); `assess score` indexes it, and the report's speed-ups
are then "side by side". What is left out says why: a cell already timed against its anchor (nothing is spent
twice), a parallel cell (it is timed with its ranks: `assess retime`), a SLURM sweep (its login node is not where
the cells rendered), an experiment's sweep (the climb times its own rivals), `timing.side_by_side=false`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from render.cell import Job, anchor_job
from render.errors import RenderError
from render.rundir import RunDir, load_runs
from render.rundir.session_log import TimingSession, read_sessions

log = logging.getLogger("render")

PURPOSE = "sweep"  # the sessions' purpose in timings.jsonl and the index
MAX_ROUNDS = 20  # as `assess retime` by default: a 95 % interval from the 6th and 15th of 20 ratios


@dataclass
class RoundOutcome:
    """What the round did, for the sweep's last lines."""

    sessions: list[TimingSession] = field(default_factory=list)
    timed: list[str] = field(default_factory=list)  # the cells timed (their description)
    already: int = 0  # cells already timed against their anchor in an earlier session: not timed again
    left_out: list[str] = field(default_factory=list)  # "<cell>: why", one per cell that could not be timed
    spent_s: float = 0.0  # wall seconds the timing added to the sweep
    skipped: str | None = None  # why no round was run at all
    interleaved: bool = False  # the sweep's own renders were the rounds (render.timing.interleave)
    extra_rounds: int = 0  # interleaved: the rounds beyond the sweep's samples (timed calls, nothing written)
    timed_keys: set[str] = field(default_factory=set)  # the cells timed in the sessions above

    def line(self, sweep_dir: Path, sweep_s: float) -> str:
        retime = f"assess retime {sweep_dir}"
        if self.skipped and not self.sessions:
            return f"side by side: not timed ({self.skipped}); the speed-ups stay timed apart until `{retime}`"
        parts = []
        if self.sessions:
            rounds = min(s.rounds for s in self.sessions)
            share = f", {self.spent_s / sweep_s:.0%} of the sweep's {sweep_s:.0f} s" if sweep_s > 0 else ""
            if self.interleaved:
                extra = f", {self.extra_rounds} beyond its samples" if self.extra_rounds else ""
                parts.append(f"{len(self.timed)} cell(s) rendered in rounds interleaved with their anchor, so the renders "
                             f"are the timing: {rounds} rounds{extra}; the warm-ups and extra calls added "
                             f"{self.spent_s:.1f} s{share}")
            else:
                parts.append(f"{len(self.timed)} cell(s) timed against their anchor in one process, {rounds} rounds, "
                             f"{self.spent_s:.1f} s{share}")
        if self.already:
            parts.append(f"{self.already} already timed (not timed again)")
        if self.left_out:
            parts.append(f"{len(self.left_out)} left out ({'; '.join(self.left_out)}): `{retime}`")
        return "side by side: " + ("; ".join(parts) or "nothing to time") + " (timing.side_by_side=false skips it)"


def skip_reason(jobs: Sequence[Job], launcher: str, waits: bool) -> str | None:
    """Why this sweep's process does not time its cells (None: it does)."""
    if not jobs:
        return "no cell"
    if not jobs[0].timing.side_by_side:
        return "timing.side_by_side=false"
    if any(job.experiment is not None for job in jobs):
        return "an experiment's sweep: the climb times its own rivals"
    if launcher.lower().startswith("slurm"):
        return "a SLURM sweep: this login node is not where the cells rendered; run it on a GPU node"
    if not waits:
        return "a detached sweep"
    return None


def timed_against(anchor: RunDir) -> set[str]:
    """The cells with a complete session of at least the minimum rounds beside this anchor (every session an
    anchor took part in is in its own timings.jsonl, whichever sweep or command ran it)."""
    from render.timing.sessions import MIN_ROUNDS

    sessions, _unreadable = read_sessions(anchor.path)
    keys = {c.cell_key for s in sessions if s.complete and s.rounds >= MIN_ROUNDS for c in s.contenders}
    return keys - {anchor.cell_key} if anchor.cell_key in keys else set()


def plan(jobs: Sequence[Job], runs: Sequence[RunDir], outcome: RoundOutcome, name: Callable[[Job], str]
         ) -> list[tuple[Job, list[Job]]]:
    """(anchor job, the cells to time against it) for each anchor of the sweep's finished cells."""
    with_samples = {r.cell_key for r in runs if r.samples}
    anchors = {r.cell_key: r for r in runs if r.is_anchor and r.samples}
    groups: dict[str, tuple[Job, list[Job]]] = {}
    seen: set[str] = set()
    for job in jobs:
        key = job.cell.key
        if key in seen or job.is_anchor or key not in with_samples or key in outcome.timed_keys:
            continue
        seen.add(key)
        anchor = anchors.get(job.anchor.key)
        if anchor is None:
            outcome.left_out.append(f"{name(job)}: its anchor has no samples here")
        elif job.gpus > 1:
            outcome.left_out.append(f"{name(job)}: a parallel cell is timed with its ranks")
        elif key in timed_against(anchor):
            outcome.already += 1
        else:
            groups.setdefault(job.anchor.key, (anchor_job(job), []))[1].append(job)
    return list(groups.values())


def at_once(runs: Sequence[RunDir], keys: Sequence[str], device: str) -> bool:
    """Whether the contenders' pipelines fit on the device together (their recorded peak memory, summed); else
    each cell is timed with its anchor, two pipelines at a time (as `assess retime --pairwise`). A CPU's memory
    is not what limits a sweep here: always at once."""
    if not device.startswith("cuda"):
        return True
    import torch

    peaks = {r.cell_key: max((s.peak_mem_bytes or 0 for s in r.samples), default=0) for r in runs if r.cell_key in keys}
    total = torch.cuda.get_device_properties(torch.device(device)).total_memory
    return 0 < sum(peaks.values()) < 0.9 * total


def least_cost_s(runs: Sequence[RunDir], keys: Sequence[str]) -> float:
    """The fewest seconds a session of these cells can take, from what their samples recorded: each loads once, warms
    up with one call and makes MIN_ROUNDS calls (a batched cell's call is its whole batch, however few samples the
    sweep gave it: a sweep of six prompts at batch 8 renders one call, its round six)."""
    import statistics

    from render.timing.sessions import MIN_ROUNDS

    total = 0.0
    for key in keys:
        records = [r for run in runs if run.cell_key == key for r in run.samples]
        calls = [r.latency_s for r in records if r.latency_s and not r.warmup] or [r.latency_s for r in records
                                                                                  if r.latency_s]
        loads = [r.load_s for r in records if r.load_s]
        total += (MIN_ROUNDS + 1) * (statistics.median(calls) if calls else 0.0) + (max(loads) if loads else 0.0)
    return total


def time_sweep(sweep_dir: Path, jobs: Sequence[Job], sweep_s: float, launcher: str, waits: bool = True,
               labels: Sequence[str] = (), interleaved: RoundOutcome | None = None) -> RoundOutcome:
    """Time the sweep's finished cells against their anchor, side by side (module doc). Never raises for the round
    itself: a round that fails is said in the outcome, and the sweep's renders stand. `labels`: each job's name as the
    user wrote it (render.rundir.cell_label of its overrides), for the outcome's lines. `interleaved`: what the
    sweep's interleaved rounds timed already (render.timing.interleave); this round times what they left."""
    from render.timing.sessions import MIN_ROUNDS, RetimeError, contenders_of, retime

    outcome = interleaved or RoundOutcome()
    outcome.skipped = skip_reason(jobs, launcher, waits)
    named = dict(zip((job.cell.key for job in jobs), labels))
    name = lambda job: named.get(job.cell.key) or job.cell.describe()  # noqa: E731
    if outcome.skipped:
        return outcome
    from render.run.loader import PIPELINES

    PIPELINES.clear()  # the sweep's own pipeline: each contender loads its own, and the device needs the room
    runs = load_runs([sweep_dir], with_anchors=True, problems=[])
    groups = plan(jobs, runs, outcome, name)
    if not groups:
        return outcome
    started, spent_before = time.perf_counter(), outcome.spent_s
    budget = jobs[0].timing.side_by_side_share * sweep_s
    sets = []
    for anchor, cells in groups:
        keys = [anchor.cell.key, *(job.cell.key for job in cells)]
        together = at_once(runs, keys, anchor.device)
        sets += [(anchor, cells)] if together else [(anchor, [job]) for job in cells]
    for done, (anchor, cells) in enumerate(sets):
        by_key = {job.cell.key: job for job in (anchor, *cells)}
        left = max(0.0, budget - spent_before - (time.perf_counter() - started)) / (len(sets) - done)
        least = least_cost_s(runs, list(by_key))
        if least > left:  # the round keeps to its share: what it cannot time within it is said, and left to retime
            share = f"{jobs[0].timing.side_by_side_share:.0%} of the sweep's {sweep_s:.0f} s"
            outcome.left_out += [f"{name(job)}: its {MIN_ROUNDS} rounds would take about {least:.0f} s, more than the "
                                 f"round's share ({share})" for job in cells]
            continue
        found = contenders_of([r for r in runs if r.cell_key in by_key], lambda run: by_key[run.cell_key])
        group = [found[k] for k in by_key if k in found]
        try:
            session = retime(group, rounds=MAX_ROUNDS, session_seconds=left, purpose=PURPOSE)
        except (RenderError, RetimeError) as error:  # noqa: PERF203 - one anchor's failure leaves the others
            outcome.left_out += [f"{name(job)}: {error}" for job in cells]
            continue
        except Exception as error:  # noqa: BLE001 - the renders stand whatever the timing round does
            log.warning("side-by-side round against %s failed: %s: %s", anchor.cell.describe(), type(error).__name__,
                        error, exc_info=True)
            outcome.left_out += [f"{name(job)}: {type(error).__name__}: {error}" for job in cells]
            continue
        outcome.sessions.append(session)
        outcome.timed += [name(job) for job in cells]
    outcome.spent_s = spent_before + time.perf_counter() - started
    return outcome
