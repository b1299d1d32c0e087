"""GPU-time budget of an experiment: what was spent (measured from its samples, in every out_root its ledger
knows), what a sweep will cost (estimated before anything launches), the reservations that let concurrent
launches share one budget, and the guard that stops a running sweep before it spends the final's reserve.

Admission (render.run.preflight) runs under the ledger's lock: spent + what live reservations have not used
yet + this estimate must fit under the navigable ceiling (the budget less the reserve; a final's token
opens the reserve). The estimate is then reserved in the ledger. A reservation lives while any process
of its launch runs (the launcher, or a worker that inherited it), or, for a detached launch, while its
cluster's work lives: a SLURM submission's jobs queued or running, a Ray job (hydra.launcher.wait=false)
pending or running on its job server; the detached work adopts the reservation instead of reserving again.
Each piece of device work is added to the spend log under its reservation (render.laws.spend); when a sample
would pass the reservation, the guard extends it under the lock if the budget has room, and otherwise stops
the remaining samples: the cell is recorded `cancelled` with a `budget:` message.
"""

from __future__ import annotations

import atexit
import os
import secrets
import statistics
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

from render.errors import RenderError
from render.laws.gpu_budget import Budget
from render.laws.ledger import Kind, Ledger
from render.laws.evidence import Gathered, held_samples
from render.laws.spend import (RESERVATION_ENV, Purpose, hold, live_holders, logged_samples, logged_seconds,
                               record_spend, spend_lines)
from render.rundir import (RunDir, RunRecord, SampleRecord, host_identity, now_iso, ray_job_state, scan_runs,
                           slurm_state, writer_state)

FIRST_LAUNCH_MARGIN = 1.5  # a cell measured in preflight (no history) is estimated at 1.5x its one sample, plus a load

if TYPE_CHECKING:  # named for the type checker only: the laws never import the cell module at run time
    from render.cell import Job


class BudgetExceeded(RenderError, ValueError):
    """The sweep's estimated cost does not fit in what is left of the budget."""


class BudgetStop(RenderError, RuntimeError):
    """A running sweep reached the experiment's navigable ceiling: its remaining samples are not rendered."""


@dataclass(frozen=True)
class History:
    """Every run known to one or more output roots (under them and registered elsewhere), read once."""

    runs: list[RunDir]

    @classmethod
    def scan(cls, out_roots: Path | Iterable[Path]) -> History:
        roots = [out_roots] if isinstance(out_roots, (str, Path)) else list(out_roots)
        runs: dict[Path, RunDir] = {}
        for root in roots:
            if Path(root).is_dir():
                for run in scan_runs(Path(root)):
                    runs.setdefault(run.path.resolve(), run)
        return cls(list(runs.values()))

    def with_runs(self, paths: Iterable[Path | str]) -> History:
        """This history and the run directories at `paths` that it lacks (runs an index knows outside the out_roots:
        a colleague's renders scored into a shared index are spent from the same budget)."""
        from render.rundir import RUN_JSON, load_runs

        known = {run.path.resolve() for run in self.runs}
        extra = sorted({Path(p).resolve() for p in paths} - known)
        extra = [p for p in extra if (p / RUN_JSON).is_file()]
        return History([*self.runs, *load_runs(extra, problems=[])]) if extra else self

    def samples(self, match: Callable[[RunRecord], bool]) -> Iterable[SampleRecord]:
        """The rendered (not linked) samples of the runs whose run.json `match` accepts."""
        for run in self.runs:
            if match(run.run):
                yield from (s for s in run.samples if s.reused_from is None)


def spent_gpu_seconds(ledger: Ledger, history: History | None = None) -> float:
    """Everything the device did for the experiment: its spend log (render.laws.spend: samples, warm-ups, failed
    calls, preflight measurements, calibrations, loads; deleting run folders returns nothing), plus, once each by
    content identity, the samples its runs hold under its ledger that no log line names (rendered before the log, or
    by another experiment or ledger and linked: such a sample costs what its rendering cost), in every out_root the
    experiment used. A sample gathered under another ledger of the experiment is that ledger's spend: not counted."""
    history = history or History.scan(ledger.out_roots())
    lines = spend_lines(ledger)
    used = held_samples(Gathered.of(ledger), ledger.name, history.runs, spend=True) - logged_samples(lines)
    return logged_seconds(lines) + sum(evidence_costs(history, used).values())


def evidence_costs(history: History, evidence: Iterable[tuple[str, str, int]]) -> dict[tuple[str, str, int], float]:
    """What each sample used as evidence cost, from its rendering record in `history` (a reused one at the cost of
    the run that rendered it, once)."""
    wanted = set(evidence)
    cost: dict[tuple[str, str, int], float] = {}
    for run in history.runs:
        for record in run.samples:
            if record.reused_from is None and record.identity in wanted:
                cost.setdefault(record.identity, record.device_s + (record.load_s or 0.0))
    return cost


# -- reservations ---------------------------------------------------------------------------


def used_seconds(ledger: Ledger, rid: str) -> float:
    """What a reservation's launch has spent so far: its lines in the spend log."""
    return logged_seconds(spend_lines(ledger), rid)


@dataclass
class Reservation:
    rid: str
    seconds: float
    owner: dict[str, Any]
    slurm_jobs: list[str]
    released: bool
    ray_jobs: list[dict[str, str]] = field(default_factory=list)  # {"id", "dashboard"}: a detached Ray sweep's job

    @property
    def detached(self) -> bool:
        """Held for a detached submission's scheduler jobs (`hold_for_jobs`)."""
        return bool(self.slurm_jobs or self.ray_jobs)

    def live(self, ledger: Ledger | None = None) -> bool:
        """While any process of its launch runs: the launcher, a worker that inherited it (`ledger` given), or,
        for a detached submission, its scheduler jobs."""
        if self.released:
            return False
        if self.detached:  # until its jobs end, wherever the submitting process went
            return (any(slurm_state(job)[0] != "crashed" for job in self.slurm_jobs)
                    or any(ray_job_state(job["dashboard"], job["id"])[0] == "running" for job in self.ray_jobs))
        if writer_state(self.owner, ask_slurm=False)[0] == "running":
            return True
        return ledger is not None and bool(live_holders(ledger, self.rid))


def reservations(ledger: Ledger) -> list[Reservation]:
    found: dict[str, Reservation] = {}
    for entry in ledger.entries():
        kind, rid = entry["kind"], entry.get("rid")
        if kind == Kind.RESERVATION:
            found[entry["rid"]] = Reservation(entry["rid"], float(entry["seconds"]), entry, [], False)
        elif rid in found and kind == Kind.EXTEND:
            found[rid].seconds = float(entry["seconds"])
        elif rid in found and kind == Kind.HOLD:
            found[rid].slurm_jobs += [str(j) for j in entry.get("slurm_jobs", [])]
            found[rid].ray_jobs += list(entry.get("ray_jobs", []))
        elif rid in found and kind == Kind.RELEASE:
            found[rid].released = True
    return list(found.values())


def outstanding_seconds(ledger: Ledger, exclude: str | None = None) -> float:
    """What live reservations (other than `exclude`) have reserved and not used yet: their used part is
    already in the spend, measured from the samples."""
    lines = spend_lines(ledger)
    return sum(max(r.seconds - logged_seconds(lines, r.rid), 0.0) for r in reservations(ledger)
               if r.rid != exclude and r.live(ledger))


_MINE: dict[str, tuple[Ledger, str]] = {}  # experiment -> this process's reservation (or its launch's)


def reserve(ledger: Ledger, seconds: float) -> str:
    """Reserve `seconds` for this process's launch (call under ledger.lock()); released when the process ends,
    unless a detached submission holds it for its jobs (`hold_for_jobs`)."""
    import secrets

    rid = secrets.token_hex(6)
    ledger.append(Kind.RESERVATION, rid=rid, seconds=seconds, **host_identity(), started_at=now_iso())
    _MINE[ledger.name] = (ledger, rid)
    os.environ[RESERVATION_ENV] = f"{ledger.name}:{rid}"  # inherited by the launch's workers (gpus, SLURM)

    def release() -> None:  # the last process of the launch releases it (a worker may outlive the launcher)
        held = any(r.rid == rid and r.detached for r in reservations(ledger))
        if not held and not live_holders(ledger, rid, exclude_self=True):
            ledger.append(Kind.RELEASE, rid=rid)

    atexit.register(release)
    return rid


def hold_for_jobs(job_ids: Sequence[str], *, ray_dashboard: str | None = None) -> None:
    """A detached submission: this process's reservations stay live until these scheduler jobs end (SLURM's, or the
    Ray jobs of the cluster whose job server is at `ray_dashboard`)."""
    for ledger, rid in _MINE.values():
        if ray_dashboard:
            ledger.append(Kind.HOLD, rid=rid, ray_jobs=[{"id": str(j), "dashboard": ray_dashboard} for j in job_ids])
        else:
            ledger.append(Kind.HOLD, rid=rid, slurm_jobs=[str(j) for j in job_ids])


def inherited_reservation(ledger: Ledger) -> str | None:
    """The reservation this process inherited from its launch for this experiment (`HYPERGRID_RESERVATION`), while
    it is held: a detached Ray sweep's driver, run on the cluster, is that launch's, not a new one."""
    name, _, rid = os.environ.get(RESERVATION_ENV, "").partition(":")
    if name != ledger.name or not rid or any(mine == rid for _, mine in _MINE.values()):
        return None  # none, another experiment's, or this process's own (a second launch here is a new one)
    return rid if any(r.rid == rid and r.live(ledger) for r in reservations(ledger)) else None


def adopt(ledger: Ledger, rid: str, seconds: float) -> None:
    """This process joins its launch's reservation `rid` as its own (call under ledger.lock()), grown to `seconds`
    when its estimate is larger, instead of reserving a second time for the same work."""
    _MINE[ledger.name] = (ledger, rid)
    held = next(r for r in reservations(ledger) if r.rid == rid)
    if seconds > held.seconds:
        ledger.append(Kind.EXTEND, rid=rid, seconds=seconds)
    _join(ledger, rid)


# -- the guard of a running sweep -----------------------------------------------------------


class BudgetGuard:
    """Keeps a running launch inside its reservation; extends it while the budget has room, else stops."""

    def __init__(self, ledger: Ledger, rid: str, ceiling_s: float) -> None:
        self.ledger, self.rid, self.ceiling_s = ledger, rid, ceiling_s

    def reserved(self) -> float:
        return next((r.seconds for r in reservations(self.ledger) if r.rid == self.rid), 0.0)

    def before(self, next_s: float) -> None:
        """Raise BudgetStop when the next sample (estimated at `next_s`) would pass the navigable ceiling."""
        used, reserved = used_seconds(self.ledger, self.rid), self.reserved()
        if used + next_s <= reserved:
            return
        with self.ledger.lock():
            spent = spent_gpu_seconds(self.ledger)
            others = outstanding_seconds(self.ledger, exclude=self.rid)
            free = self.ceiling_s - spent - others - max(reserved - used, 0.0)
            if free < next_s:
                raise BudgetStop(
                    f"budget: experiment {self.ledger.name} has spent {spent / 3600:.4f} GPU-h (and other launches hold "
                    f"{others / 3600:.4f}) of its navigable {self.ceiling_s / 3600:.4f}; the remaining samples are not "
                    "rendered, what is kept for the final stays the final's")
            grant = min(free, max(4 * next_s, 0.25 * reserved))
            self.ledger.append(Kind.EXTEND, rid=self.rid, seconds=reserved + grant)

    def spent(self, seconds: float) -> None:
        """Device work of this launch outside the renderer's own accounting (recorded in the spend log)."""
        record_spend(self.ledger, seconds, Purpose.SAMPLE, rid=self.rid)


def _join(ledger: Ledger, rid: str) -> None:
    """A worker that inherited its launch's reservation holds it while it runs; the last process releases it."""
    if (ledger.name, rid) in _JOINED:
        return
    _JOINED.add((ledger.name, rid))
    holder = hold(ledger, rid)

    def leave() -> None:
        holder.unlink(missing_ok=True)
        mine = next((r for r in reservations(ledger) if r.rid == rid), None)
        if mine is not None and not mine.released and not mine.detached and not mine.live(ledger):
            ledger.append(Kind.RELEASE, rid=rid)

    atexit.register(leave)


_JOINED: set[tuple[str, str]] = set()


def guard_for(job: Job) -> BudgetGuard | None:
    """The budget guard of an experiment's job: this process's reservation, or the one its launch passed down."""
    experiment = job.experiment
    if experiment is None:
        return None
    name = experiment.name
    if name in _MINE:
        ledger, rid = _MINE[name]
    else:
        inherited = os.environ.get(RESERVATION_ENV, "")
        if not inherited.startswith(f"{name}:"):
            return None
        ledger, rid = Ledger(name, job.out_root), inherited.split(":", 1)[1]
        _join(ledger, rid)
    from render.laws.rule import budget_in_force

    budget = budget_in_force(ledger, experiment.budget)
    return BudgetGuard(ledger, rid, budget.navigable_s(experiment.final, final_estimate(ledger)))


# -- estimates ------------------------------------------------------------------------------


def seconds_per_sample(history: History, model: str, height: int, width: int, device_kind: str, steps: int,
                       cell_key: str | None = None) -> float | None:
    """The cell's own median warm latency when it has history; else a latency = a + b*steps fit over the
    model's samples at this resolution on this device kind; None without any history."""
    if cell_key:
        own = [r.latency_s for r in history.samples(lambda m: m.cell_key == cell_key) if not r.warmup and r.latency_s]
        if own:
            return statistics.median(own)

    def same_setting(meta: RunRecord) -> bool:
        cell = meta.cell
        return (cell.get("model", {}).get("name"), cell.get("height"), cell.get("width"), cell.get("device_kind")) == (model, height, width, device_kind)

    points = [(r.steps, r.latency_s) for r in history.samples(same_setting)
              if not r.warmup and r.steps is not None and r.latency_s is not None]
    if not points:
        return None
    by_steps: dict[int, list[float]] = {}
    for s, latency in points:
        by_steps.setdefault(s, []).append(latency)
    medians = {s: statistics.median(v) for s, v in by_steps.items()}
    if len(medians) == 1:
        ((s, latency),) = medians.items()
        return latency * steps / s
    slope, intercept = statistics.linear_regression(list(medians), list(medians.values()))
    return max(intercept + slope * steps, min(medians.values()) * 0.1)


def load_seconds(model: str, history: History) -> float:
    """Median recorded load time of the model (0 without history)."""
    loads = [r.load_s for r in history.samples(lambda m: (m.cell.get("model") or {}).get("name") == model) if r.load_s]
    return statistics.median(loads) if loads else 0.0


@dataclass(frozen=True)
class Estimate:
    seconds: float
    measured_cells: int  # cells estimated from a one-sample measurement (no history)


def estimate_jobs(jobs: Sequence[Any], pending: dict[str, int], history: History, measure: Any = None) -> Estimate:
    """Seconds the jobs' pending samples will take, with the calibration renders of a cell that renders (MagCache
    without ratios: one per process that configures it). `measure(job) -> (seconds per sample, load seconds)` is
    asked for cells without history (a one-sample preflight measurement): a first launch is estimated with its model
    load and a safety margin (FIRST_LAUNCH_MARGIN)."""
    total, measured = 0.0, 0
    loads: dict[str, float] = {}
    for model in {job.cell.model.name for job in jobs if pending.get(job.cell.key)}:
        loads[model] = load_seconds(model, history)  # each process loads each model once
    for job in jobs:
        n = pending.get(job.cell.key, 0)
        if n == 0:
            continue
        c = job.cell
        per_sample = seconds_per_sample(history, c.model.name, c.height, c.width, c.device_kind, c.steps, c.key)
        if per_sample is None:
            if measure is None:
                raise BudgetExceeded(f"no history to estimate cell {c.describe()} and no measurement available")
            per_sample, load_s = measure(job)
            per_sample *= FIRST_LAUNCH_MARGIN
            loads[c.model.name] = max(loads.get(c.model.name, 0.0), load_s * FIRST_LAUNCH_MARGIN)
            measured += 1
        # GPU-seconds: a parallel cell holds its width for each sample, and for a cache's calibration render
        total += (n + job.calibration_renders) * per_sample * job.gpus
    return Estimate(total + sum(loads.values()), measured)


BUDGET_REFUSAL = "needs an estimated"  # how device work refused for budget says so (the climb reads it)


def final_estimate(ledger: Ledger) -> float | None:
    """The final's estimate the climb last recorded in the ledger (Kind.KEEP), or None before any."""
    entry = ledger.latest(Kind.KEEP)
    return float(entry["seconds"]) if entry is not None else None


def keep_for_final(ledger: Ledger, final_estimate_s: float | None) -> None:
    """Record the final's current estimate (the climb, at every generation) when it moved: every later launch's
    admission and every running sweep's guard keep it back (Budget.kept_s)."""
    if final_estimate_s is None or not ledger.reconciled().chain:
        return
    if final_estimate(ledger) != round(final_estimate_s, 3):
        ledger.append(Kind.KEEP, seconds=round(final_estimate_s, 3))


SHRINK_SWEEP = "Shrink the sweep (fewer cells, a lower prompts.limit)"


def check_budget(name: str, budget: Budget, final: bool, spent_s: float, estimate: Estimate,
                 final_estimate_s: float | None = None, *, what: str = "this sweep", shrink: str = SHRINK_SWEEP,
                 unknown: bool = False) -> None:
    """Refuse device work (a sweep, a timing session, a probe) whose estimate does not fit: what is kept for the final
    (the reserve, or the final's recorded estimate with its margin) is only the final's. `unknown`: work whose cost
    nothing predicts yet (a probe's first step) needs some budget left."""
    left_s = budget.navigable_s(final, final_estimate_s) - spent_s
    # work with nothing left to render spends nothing: always admitted
    if estimate.seconds > max(left_s, 0.0) or (unknown and left_s <= 0.0):
        price = budget.cost(estimate.seconds)
        reserve = "" if final else f", {budget.kept_text(final_estimate_s)}"
        raise BudgetExceeded(
            f"experiment {name}: {what} {BUDGET_REFUSAL} {estimate.seconds / 3600:.4f} GPU-hours{price}, "
            f"but only {max(left_s, 0) / 3600:.4f} are left (spent and held by running launches {spent_s / 3600:.4f} of "
            f"{budget.gpu_hours:.4f}{reserve}); nothing was launched. {shrink} or raise experiment.budget.gpu_hours by "
            f"an amendment (assess climb {name} --amend)")


def admit_step(ledger: Ledger, composed_budget: Any, final: bool, history: History, what: str, next_s: float) -> None:
    """One step of device work whose cost is learnt as it runs (preflight's measurement of a cell without history:
    its model load, a cache's calibration render, its timed renders), admitted before it starts as a sweep is, under
    the ledger's lock: spend (what the earlier steps took among it) + live reservations' unused part + the step's
    estimate (`next_s`: what its like took before; 0 when nothing predicts it, which then needs some budget left)
    under the navigable ceiling, the reserve only for the final's own work. It reserves nothing (its spend lines are
    in the log as it runs) and writes no ledger entry, so a launch refused after it leaves the experiment as it found
    it. BudgetExceeded when it does not fit."""
    from render.laws.rule import budget_in_force

    with ledger.lock():
        spent = spent_gpu_seconds(ledger, history) + outstanding_seconds(ledger, exclude=inherited_reservation(ledger))
        check_budget(ledger.name, budget_in_force(ledger, composed_budget), final, spent, Estimate(next_s, 0),
                     final_estimate(ledger), what=what, unknown=next_s <= 0)


# -- device work outside a sweep --------------------------------------------------------------

SESSION_WARMUPS = 2  # warm-up calls a contender of a timing session makes, counted in its estimate


@dataclass(frozen=True)
class DeviceWork:
    """Device work of an experiment outside a sweep (a side-by-side timing session: `assess retime`, the climb's,
    the final's), admitted as a sweep is."""

    what: str  # how the refusal names it, e.g. "assess retime (20 rounds, 3 cells)"
    seconds: float  # its estimate, from the records of what it will run
    final: bool  # the final's own work, under its open claim: it may spend the reserve
    shrink: str = "Time fewer rounds (--rounds, at least 6) or cells"


def session_seconds(runs: Sequence[RunDir], rounds: int) -> float:
    """A timing session's device seconds, computed from its contenders' sample records: each cell's load, then its
    warm-ups and rounds at its median recorded call, times the devices it holds."""
    by_cell: dict[str, list[SampleRecord]] = {}
    for run in runs:
        by_cell.setdefault(run.cell_key, []).extend(run.samples)
    total = 0.0
    for records in by_cell.values():
        calls = [r.latency_s * (r.gpus or 1) for r in records if r.latency_s]
        loads = [r.load_s * (r.gpus or 1) for r in records if r.load_s]
        total += max(loads, default=0.0) + (rounds + SESSION_WARMUPS) * (statistics.median(calls) if calls else 0.0)
    return total


@contextmanager
def admitted(ledger: Ledger, composed_budget: Any, work: DeviceWork) -> Iterator[str]:
    """Admit `work` as a sweep is admitted (under the ledger's lock: spent + live reservations' unused part + its
    estimate under the navigable ceiling; the reserve only for the final's own work), reserve its estimate while it
    runs (its spend lines name the reservation, render.laws.spend.ledger_of) and release it after. ExperimentGuard
    when the experiment has no ledger to admit it under; BudgetExceeded when it does not fit."""
    from render.laws.anchor import ExperimentGuard
    from render.laws.rule import budget_in_force

    if ledger.first(Kind.RULE) is None:
        raise ExperimentGuard(f"experiment {ledger.name}: {work.what} is device work of the experiment, but no copy of "
                              f"its ledger has its frozen rule ({', '.join(map(str, ledger.copies()))}), so it cannot be "
                              "admitted against its budget; nothing was run. Run it with the $HYPERGRID_STATE and "
                              "out_root that launched the experiment, or restore its ledger")
    with ledger.lock():
        spent = spent_gpu_seconds(ledger) + outstanding_seconds(ledger)
        check_budget(ledger.name, budget_in_force(ledger, composed_budget), work.final, spent,
                     Estimate(work.seconds, 0), final_estimate(ledger), what=work.what, shrink=work.shrink)
        rid = secrets.token_hex(6)
        ledger.append(Kind.RESERVATION, rid=rid, seconds=work.seconds, what=work.what, **host_identity(),
                      started_at=now_iso())
    inherited = os.environ.get(RESERVATION_ENV)
    os.environ[RESERVATION_ENV] = f"{ledger.name}:{rid}"  # the session's spend lines name it
    try:
        yield rid
    finally:
        if inherited is None:
            os.environ.pop(RESERVATION_ENV, None)
        else:
            os.environ[RESERVATION_ENV] = inherited
        ledger.append(Kind.RELEASE, rid=rid)


@contextmanager
def admitted_timing(sessions: Sequence[Sequence[RunDir]], rounds: int, *, final: bool, what: str) -> Iterator[None]:
    """Side-by-side timing sessions (render.timing.sessions), each of its runs' cells, admitted before any pipeline is
    loaded: the texts they time pass the holdout lock (render.laws.holdout.check_timed_texts: a holdout is timed by
    its final only, before its token is spent), and their estimate (`session_seconds`) is admitted in the budget of
    every experiment their runs name (`admitted`)."""
    from contextlib import ExitStack

    from render.laws.holdout import check_timed_texts
    from render.rundir import experiment_of

    runs = [run for session in sessions for run in session]
    experiments: dict[str, tuple[Ledger, dict[str, Any]]] = {}
    for run in runs:
        experiment = experiment_of(run.run)
        if experiment is not None:
            experiments.setdefault(experiment.name, (Ledger(experiment.name, Path(run.run.out_root or run.path.parent)),
                                                     experiment.budget))
    texts = sorted({text for session in sessions for text in timed_texts(session)})
    ledger = next((pair[0] for pair in experiments.values()), None)
    check_timed_texts(ledger, [Path(r.run.out_root) for r in runs if r.run.out_root], texts,
                      {r.cell_key for r in runs}, final=final)
    seconds = sum(session_seconds(session, rounds) for session in sessions)
    with ExitStack() as stack:
        for ledger, budget in experiments.values():
            stack.enter_context(admitted(ledger, budget, DeviceWork(what, seconds, final)))
        yield


def timed_texts(runs: Sequence[RunDir]) -> list[str]:
    """The texts every cell of `runs` has a recorded sample of: what a session of them times."""
    by_cell: dict[str, dict[tuple[str, int], str]] = {}
    for run in runs:
        for record in run.samples:
            if record.prompt is not None:
                by_cell.setdefault(run.cell_key, {})[(record.text_id, record.seed)] = record.prompt
    if not by_cell:
        return []
    first, *rest = by_cell.values()
    return sorted({text for key, text in first.items() if all(key in other for other in rest)})
