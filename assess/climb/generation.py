"""`assess climb <experiment>`: read the index, decide one generation, record it, print (or run) it.

`climb()` ties the pieces together: the experiment (assess.experiment), the cells' tables
(observe), the recorded generations (records), the budget (render.laws.admission, from the files), the
decision (decide) and the commands (commands). The decision logic lives in decide.py alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assess.climb.commands import Command, generation_commands, run_and_score
from assess.climb.decide import BudgetState, Decision, Estimator, Plan, decide, history_entry, state_fingerprint
from assess.climb.observe import Observed, observe, sync_run_experiments
from assess.climb.plan import CellData
from assess.climb.archive import read_generations, sync_index, write_generation
from assess.errors import AssessError
from assess.experiment import Experiment, load_experiment
from assess.index.database import Index, now_iso

Log = Callable[[str], None]


class NeedsScoring(AssessError):
    """Cells of the experiment have samples without a quality score."""


class ExperimentOver(AssessError):
    """The experiment's final was claimed: the climb does not navigate any more."""


@dataclass
class Step:
    """One generation, as decided (and recorded) by one call."""

    exp: Experiment
    plan: Plan
    observed: Observed
    decision: Decision
    budget: BudgetState
    commands: list[Command]
    record: dict[str, Any]
    path: Path
    new: bool  # recorded by this call (False: the state had not changed since it was recorded)
    sweeps: list[Path] = field(default_factory=list)  # what --apply rendered and scored


class StrangerRuns(AssessError):
    """Runs name the experiment but compare with another anchor than its ledger's frozen one, and were not adopted."""


def budget_state(exp: Experiment, observed: Observed | None = None) -> BudgetState:
    """Spent across every out_root of the experiment's ledger (its spend log and its runs' samples) and, `observed`
    given, every run of the experiment the index knows elsewhere (a shared index: a colleague's renders) and every
    sample the climb uses as evidence, whoever rendered it (an anchor rendered outside the experiment): those are
    recorded in the spend log first, once each at their recorded cost."""
    from render.laws.admission import History, evidence_costs, spent_gpu_seconds
    from render.laws.spend import record_evidence

    ledger = exp.ledger
    history = History.scan(ledger.out_roots()).with_runs(
        [*observed.run_paths, *observed.evidence_runs] if observed else [])
    if observed is not None and observed.evidence and ledger.reconciled().chain:
        # the samples the climb decides on, whoever rendered them, enter the spend log: the renderer's admission
        # reads the same spend (render.laws.spend)
        record_evidence(ledger, evidence_costs(history, observed.evidence))
    return BudgetState(exp.budget, spent_gpu_seconds(ledger, history))


def estimator(exp: Experiment, observed: Observed) -> Estimator | None:
    """Device seconds from the experiment's history, as the renderer estimates them (render.laws.admission):
    a cell's own median warm latency when it has one, else a fit over steps; None without history."""
    from render.laws.admission import History, seconds_per_sample

    height, width, device_kind = observed.height, observed.width, observed.device_kind
    if device_kind is None or height is None or width is None:
        return None
    history = History.scan(exp.ledger.out_roots())
    cache: dict[tuple[Any, int], float | None] = {}

    def estimate(coords: tuple[str, ...] | None, steps: int, samples: int) -> float | None:
        key = observed.anchor_key if coords is None else observed.keys.get(coords)
        if (key, steps) not in cache:
            cache[(key, steps)] = seconds_per_sample(history, exp.model, height, width, device_kind, steps,
                                                     cell_key=key)
        per_sample = cache[(key, steps)]
        return None if per_sample is None else per_sample * samples

    return estimate


def final_claimed(exp: Experiment) -> dict[str, Any] | None:
    """The experiment's claim of its final, from its ledger (any copy, any out_root or working folder)."""
    from render.laws import final_record

    return final_record(exp.ledger)


def rule_summary(exp: Experiment) -> dict[str, Any]:
    """What a generation record keeps of the decision rule it was decided under."""
    from render.laws.rule import rule_digest

    return {"digest": rule_digest(exp.rule), "objective": str(exp.objective),  # what objective_value measures
            "quality": exp.rule.get("quality"), "rungs": exp.rule.get("rungs"),
            "eta": exp.rule.get("eta"), "budget": exp.rule.get("budget"),
            "amendments": [{"at": a.get("at"), "reason": a.get("reason"), "changes": a.get("changes")}
                           for a in exp.amendments]}


def evaluation_dict(exp: Experiment, decision: Decision, coords: tuple[str, ...]) -> dict[str, Any]:
    e = decision.current.get(coords)
    return {"cell": exp.as_dict(coords), **({} if e is None else {
        "rung": e.rung, "n": e.n, "delta": e.mean, "low": e.low, "high": e.high, "wilcoxon_holm": e.wilcoxon_holm,
        "tost_p": e.tost_p, "verdict": e.verdict, "objective_value": e.latency})}


def ledger_stamp(ledger: Any) -> dict[str, Any]:
    from render.laws.ledger import ledger_stamp as stamp

    return stamp(ledger)


def make_record(exp: Experiment, plan: Plan, observed: Observed, decision: Decision, budget: BudgetState,
                commands: Sequence[Command]) -> dict[str, Any]:
    inc = decision.incumbent
    budget = decision.budget or budget
    return {
        **history_entry(plan, decision, state_fingerprint(plan, observed.cells)),
        "experiment": exp.name,
        "ledger": ledger_stamp(exp.ledger),  # the experiment's identity and the ledger head it was decided under
        "created_at": now_iso(),
        "axes": list(exp.axes),
        "rule": rule_summary(exp),
        "incumbent": {**evaluation_dict(exp, decision, inc), "status": decision.incumbent_status,
                      "cell_key": observed.keys.get(inc), "overrides": exp.cell_overrides(inc)},
        "cells": [evaluation_dict(exp, decision, c) for c in sorted(decision.current, key=plan.grid_index)],
        "dropped": [{**p.as_dict(plan), "why": why} for p, why in decision.dropped],
        "commands": [c.text for c in commands],
        "reasons": decision.reasons,
        "note": decision.note,
        "budget": {"spent_s": budget.spent_s, "limit_s": budget.limit_s, "reserve_s": budget.reserve_s,
                   "final_s": budget.final_s, "left_s": budget.left_s, "est_s": decision.est_s,
                   "price_per_gpu_hour": budget.price_per_gpu_hour},
    }


def check_index_evidence(index: Index, exp: Experiment) -> None:
    """The index's runs of the experiment are its evidence too (a shared index: runs outside every out_root its
    ledger knows): a lost or fresh ledger, or a changed quality rule, is refused on them as on the runs on disk
    (render.laws.evidence.check_ledger_held)."""
    from render.errors import RenderError
    from render.laws.evidence import check_ledger_held, run_records, traces

    from assess.climb.observe import experiment_runs

    known = {str(p) for p in exp.ledger.out_roots()}
    paths = [r["path"] for r in experiment_runs(index, exp.name)
             if not any(str(r["path"]).startswith(root) for root in known)]  # those on disk were read at load
    if not paths:
        return
    try:
        check_ledger_held(exp.ledger, traces(exp.ledger, run_records(exp.ledger, paths)), exp.rule)
    except RenderError as error:
        raise AssessError(str(error)) from None


def _observe(index: Index, exp: Experiment, db: Path | None, apply: bool, log: Log) -> Observed:
    sync_run_experiments(index)
    check_index_evidence(index, exp)
    observed = observe(index, exp)
    if observed.strangers:
        from render.laws.evidence import strangers_message

        raise StrangerRuns(strangers_message(exp.ledger, observed.strangers))
    if observed.to_score:
        paths = " ".join(str(p) for p in observed.to_score)
        if not apply:
            raise NeedsScoring(f"experiment {exp.name}: cells have samples without {exp.quality.metric} scores; "
                               f"run `assess score {paths} --metrics {exp.quality.metric}` (or climb with --apply)")
        from assess.scoring.ingest import score

        log(f"scoring {paths}")
        score(list(observed.to_score), db, metrics=[exp.quality.metric])
        sync_run_experiments(index)
        observed = observe(index, exp)
    return observed


@dataclass
class Replay:
    """The climb's decision for the index as it is now, as `assess climb` makes it."""

    plan: Plan
    history: list[dict[str, Any]]  # every recorded generation
    prior: list[dict[str, Any]]  # those decided before the current state (the last one is left out when it was
    # recorded from this very state: it is the decision being replayed)
    decision: Decision

    @property
    def recorded(self) -> bool:
        """The last recorded generation was decided from the current state."""
        return len(self.prior) < len(self.history)


def replay(exp: Experiment, observed: Observed) -> Replay:
    """The one replay of a decision, for the climb, the final and the report alike: the same history, budget
    and cost estimator, so none of them can tell another story than the climb printed."""
    plan = Plan.from_experiment(exp)
    history = read_generations(exp.out_root, exp.name)
    recorded = bool(history) and history[-1]["state"] == state_fingerprint(plan, observed.cells)
    prior = history[:-1] if recorded else history
    decision = decide(plan, observed.cells, prior, budget_state(exp, observed), estimator(exp, observed),
                      observed.anchor_rendered)
    return Replay(plan, history, prior, decision)


def _same_outcome(decision: Decision, record: dict[str, Any], plan: Plan) -> bool:
    return ([p.as_dict(plan)["cell"] for p in decision.proposals] == [p["cell"] for p in record["proposals"]]
            and [p.rung for p in decision.proposals] == [p["rung"] for p in record["proposals"]]
            and decision.stop == record["stop"])


CLIMB_ROUNDS = 12  # side-by-side rounds of an incumbent and a rival within noise (assess.statistics.side_by_side: 95 % interval)


def side_by_side_cost(plan: Plan, cell: CellData, value: float | None) -> float:
    """The device seconds a cell costs in a CLIMB_ROUNDS side-by-side session (its warm-ups and checks: about as
    much again), from its objective value: GPU-seconds, its latency (a batched cell's whole call) times the GPUs it
    holds."""
    latency = (value or 0.0) / plan.objective.per_image(1.0, cell.per_image)
    return CLIMB_ROUNDS * 2 * latency * cell.width


def time_rivals(exp: Experiment, index: Index, db: Path | None, observed: Observed, decision: Decision, log: Log
                ) -> bool:
    """Before crowning an incumbent over rivals within noise that were never timed with it, time them side by side
    (CLIMB_ROUNDS rounds on the dev samples they share; the session's device time is spent from the budget). True
    when a session was recorded (the caller observes again)."""
    from assess.errors import Refused
    from assess.retime import Options, retime_runs

    timed = [c for c in [decision.incumbent, *decision.untimed] if observed.keys.get(c)]
    keys = [observed.keys[c] for c in timed]
    if len(keys) < 2:  # a parallel cell is timed with its ranks (render.timing.sessions), one per session
        return False
    plan = Plan.from_experiment(exp)
    cost = sum(side_by_side_cost(plan, observed.cells[c], decision.current[c].latency) for c in timed)
    budget = decision.budget
    if budget is not None and cost > budget.left_s:
        log(f"not timing {exp.label(decision.incumbent)} against its rivals within noise side by side: an estimated "
            f"{cost:.0f} s of device time, {max(budget.left_s, 0):.0f} s left in the budget")
        return False
    marks = ", ".join("?" * len(keys))
    runs = index.query(f"SELECT DISTINCT path FROM runs WHERE cell_key IN ({marks}) AND split = ?",
                       (*keys, exp.dev.split))
    log(f"within noise on speed: timing {', '.join(exp.label(c) for c in timed)} "
        f"side by side ({CLIMB_ROUNDS} rounds) before choosing")
    try:
        retime_runs([r["path"] for r in runs], db, Options(rounds=CLIMB_ROUNDS, every_pair=True, cells=frozenset(keys),
                                                           purpose="climb", experiment=exp.name), log=log)
    except Refused as refused:  # not admitted (the budget, the holdout lock): decided on the render-time figures
        log(f"not timing them side by side: {refused}")
        return False
    return True


def one_generation(exp: Experiment, index: Index, db: Path | None, apply: bool, log: Log) -> Step:
    """Decide the next generation; when nothing changed since the last one was recorded, that one again. With
    apply, rivals within noise of the incumbent are timed side by side first (`time_rivals`)."""
    observed = _observe(index, exp, db, apply, log)
    again = replay(exp, observed)
    if apply and again.decision.untimed and time_rivals(exp, index, db, observed, again.decision, log):
        observed = _observe(index, exp, db, apply, log)
        again = replay(exp, observed)
    plan, history, budget = again.plan, again.history, budget_state(exp, observed)
    if again.recorded and _same_outcome(again.decision, history[-1], plan):
        decision, record = again.decision, history[-1]
        commands = generation_commands(exp, plan, decision.proposals)
        sync_index(index, exp.name, history, None, None)
        return Step(exp, plan, observed, decision, decision.budget or budget, commands, record,
                    Path(record["record"]), False)
    decision = (decide(plan, observed.cells, history, budget, estimator(exp, observed), observed.anchor_rendered)
                if again.recorded else again.decision)
    if decision.budget is not None:  # every launch from now on keeps the final's current estimate back
        from render.laws.admission import keep_for_final

        keep_for_final(exp.ledger, decision.budget.final_s)
    commands = generation_commands(exp, plan, decision.proposals)
    record = make_record(exp, plan, observed, decision, budget, commands)
    path = write_generation(exp.out_root, exp.name, record)
    sync_index(index, exp.name, [*history, {**record, "record": str(path)}], None, None)
    return Step(exp, plan, observed, decision, decision.budget or budget, commands, record, path, True)


def adopt_strangers(name: str, reason: str, db: Path | None = None, out_root: Path | None = None,
                    overrides: Sequence[str] = ()) -> list[Any]:
    """Record, with its reason, the adoption of the experiment's runs that compare with another anchor than its frozen
    one (render.laws.evidence): listed from then on, counted in the budget, never ranked. Returns what was adopted."""
    from render.errors import RenderError
    from render.laws.admission import History
    from render.laws.evidence import adopt, runs_naming, strangers

    exp = load_experiment(name, overrides, out_root, strict=False)
    with Index.open(db) as index:
        sync_run_experiments(index)
        found = observe(index, exp).strangers
    on_disk = runs_naming(exp.ledger, History.scan(exp.ledger.out_roots()))  # also those the index never saw
    known = {s.path for s in found}
    found += [s for s in strangers(exp.ledger, [(str(r.path), r.cell_key, r.anchor_cell_key) for r in on_disk])
              if s.path not in known]
    try:
        adopt(exp.ledger, found, reason)
    except RenderError as error:
        raise AssessError(str(error)) from None
    return found


def climb(name: str, db: Path | None = None, out_root: Path | None = None, apply: bool = False,
          generations: int = 1, overrides: Sequence[str] = (), log: Log = print,
          show: Callable[[Step], None] | None = None) -> list[Step]:
    """Decide the next generation (up to `generations` with apply, until the climb stops)."""
    exp = load_experiment(name, overrides, out_root)
    final = final_claimed(exp)
    if final is not None:
        raise ExperimentOver(f"experiment {name} is over: its final was claimed on {final.get('at', '?')}; "
                             f"the climb does not navigate after the holdout is seen. See `assess report {name}`")
    steps = []
    with Index.open(db) as index:
        for _ in range(max(1, generations) if apply else 1):
            step = one_generation(exp, index, db, apply, log)
            steps.append(step)
            if show:
                show(step)
            if not apply or step.decision.stop:
                break
            step.sweeps, refused = run_and_score(step.commands, exp, db, log)
            if refused and not refused.for_budget:  # what was rendered before it is scored; the next climb decides
                raise refused
            # refused for budget (its renders ran slower than their estimate): the next decision sees what was spent
            # and stops on budget, keeping what the final needs
    return steps
