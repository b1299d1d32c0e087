"""`assess climb <experiment> --plan`: what a climb will render and cost, before anything runs (issue 63, item 2).

The plan is the climb's own first decision (assess.climb.decide on the experiment as it stands: the start and its
one-factor neighbours at the first rung), carried through successive halving (the best 1/eta of each rung climbs
to the next, rendering only the prompts it lacks), the anchor's samples on the top rung's prompts, and the final
(the incumbent, the steps-only control and the anchor on the holdout). Each sample is costed as the admission law
costs it (render.laws.admission.seconds_per_sample: the model's history at this resolution on this device kind,
latency = a + b x steps), else from a per-step figure the user gives (`--seconds-per-step`, e.g. from one render);
without either, the plan counts cells and samples and says how to get the seconds. It reads; it writes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from assess.climb.decide import decide
from assess.climb.plan import BudgetState, Coords, Plan
from assess.experiment import Experiment
from render.laws.gpu_budget import FINAL_MARGIN

PerSample = Callable[[int], "float | None"]  # a sample's device seconds at these steps (None: unknown)


@dataclass(frozen=True)
class Stage:
    """One part of the plan: its cells and the samples they render, and their estimated device seconds."""

    name: str
    cells: int
    samples: int
    seconds: float | None


@dataclass(frozen=True)
class ClimbPlan:
    experiment: str
    device: str
    source: str  # how each sample's seconds were estimated (or why they are not)
    first: list[str]  # the first rung's cells, by their overrides
    stages: list[Stage]  # the rungs, then the anchor
    final: Stage
    budget: BudgetState
    notes: list[str] = field(default_factory=list)

    @property
    def pass_s(self) -> float | None:
        """One pass of successive halving: every rung and the anchor."""
        parts = [s.seconds for s in self.stages]
        return None if any(p is None for p in parts) else sum(parts)  # type: ignore[arg-type]

    @property
    def kept_s(self) -> float:
        """What every launch keeps back for the final: the reserve, or the final's estimate with its margin."""
        return self.budget.budget.kept_s(self.final.seconds)

    @property
    def navigable_s(self) -> float:
        return self.budget.limit_s - self.kept_s - self.budget.spent_s

    @property
    def fits(self) -> bool | None:
        if self.pass_s is None:
            return None
        return self.pass_s <= self.navigable_s  # the final fits in what is kept back: at least its estimate x margin

    def needs_s(self) -> float:
        """How much more budget one pass and the final need (0 when they fit)."""
        return max((self.pass_s or 0.0) - self.navigable_s, 0.0)

    def lines(self) -> list[str]:
        b = self.budget
        out = [f"plan for experiment {self.experiment} on {self.device} ({self.source}); nothing has run:",
               f"  first rung's cells: {', '.join(self.first)}"]
        width = max(len(s.name) for s in [*self.stages, self.final])
        for s in [*self.stages, self.final]:
            out.append(f"  {s.name:<{width}}  {s.cells:>3} cell(s)  {s.samples:>5} sample(s)  {_hours(s.seconds)}")
        out.append(f"  one pass of successive halving: {_hours(self.pass_s)}; the final {_hours(self.final.seconds)}, "
                   f"kept back from the start: {_hours(self.kept_s)} (the larger of the reserve, {b.reserve_s / 3600:.3g} "
                   f"GPU-h, and the final's estimate x {FINAL_MARGIN})")
        out.append(f"  budget {_hours(b.limit_s)}, spent {_hours(b.spent_s)}: {_hours(max(self.navigable_s, 0.0))} to "
                   "navigate with")
        out += [f"  {note}" for note in self.notes]
        if self.fits is None:
            out.append("answer: the cells and samples above; their GPU-hours are unknown: " + self.source)
        elif self.fits:
            passes = int(self.navigable_s // self.pass_s) if self.pass_s else 0
            out.append(f"answer: fits: one pass takes {_share(self.pass_s, self.navigable_s)} of what the budget leaves "
                       f"to navigate" + (f" (room for about {passes} such passes)" if passes > 1 else "")
                       + "; the final's share is kept back.")
        else:
            need = self.needs_s()
            out.append(f"answer: does not fit: one pass and the final need {_hours(need)} more than the budget leaves "
                       f"(experiment.budget.gpu_hours={_up((b.limit_s + need) / 3600)} or more, or fewer cells, "
                       "prompts or rungs).")
        return out


def _hours(seconds: float | None) -> str:
    if seconds is None:
        return "? GPU-h"
    return f"{seconds / 3600:.3g} GPU-h" + (f" ({seconds:.0f} s)" if seconds < 3600 else "")


def _up(hours: float) -> str:
    """`hours` rounded up to 3 significant digits: a budget of this figure fits what it is asked for."""
    digits = 2 - math.floor(math.log10(hours)) if hours > 0 else 0
    return f"{math.ceil(hours * 10 ** digits) / 10 ** digits:.{max(digits, 0)}f}"


def _share(part: float | None, whole: float) -> str:
    return "all" if not part or whole <= 0 else f"{100 * part / whole:.0f} %"


def plan_climb(exp: Experiment, budget: BudgetState, per_sample: PerSample, device: str, source: str) -> ClimbPlan:
    """The plan of `exp`'s climb from where it stands (its first decision, as `assess climb` would make it now)."""
    plan = Plan.from_experiment(exp)
    first = decide(plan, {}, [], budget).proposals
    first_rung = min((p.rung for p in first), default=plan.rungs[0])
    cells: list[Coords] = [p.coords for p in first if p.rung == first_rung]
    seeds = plan.n_seeds

    def cost(cells_steps: list[int], samples_each: int) -> float | None:
        """The device seconds of cells of these steps, each rendering `samples_each` samples."""
        total = 0.0
        for steps in cells_steps:
            each = per_sample(steps)
            if each is None:
                return None
            total += each * samples_each
        return total

    stages: list[Stage] = []
    steps = [plan.steps_of(c) for c in cells]
    before = 0
    rungs = [r for r in plan.rungs if r >= first_rung]
    for k, rung in enumerate(rungs):
        n = len(steps)
        new = (rung - before) * seeds
        stages.append(Stage(f"rung {k + 1}: {rung} prompts x {seeds} seed(s)", n, n * new, cost(steps, new)))
        before = rung
        # the best 1/eta climb; the plan cannot know which, so it keeps the costliest (a cautious estimate)
        steps = sorted(steps, reverse=True)[:max(1, math.ceil(n / plan.eta))]
    top = rungs[-1] * seeds if rungs else 0
    stages.append(Stage(f"anchor: {rungs[-1] if rungs else 0} prompts", 1, top, cost([plan.anchor_steps], top)))
    holdout = plan.holdout_n * seeds
    incumbent = plan.steps_of(cells[0]) if cells else plan.anchor_steps
    final = Stage(f"final: {plan.holdout_n} holdout prompts", 3, 3 * holdout,
                  cost([incumbent, incumbent, plan.anchor_steps], holdout))
    notes = ["later generations move the incumbent and sweep its neighbours again, each costing about what the first "
             "rung does; the climb stops at parity on the top rung, when the frontier stops moving, or when only the "
             "final's share is left"]
    return ClimbPlan(exp.name, device, source, [exp.label(c) for c in cells], stages, final, budget, notes)


def climb_plan(name: str, out_root: Path | None = None, overrides: Sequence[str] = (),
               seconds_per_step: float | None = None) -> ClimbPlan:
    """The plan of experiment `name` as it stands, on the device its config names (`--set device=cuda`), each sample
    costed from `seconds_per_step` when given, else from the model's history there."""
    from assess.climb.generation import budget_state
    from assess.experiment import compose, load_experiment
    from render.cell import build_job
    from render.laws.admission import History, seconds_per_sample

    from render.compose.composition import composed_once

    with composed_once():  # four compositions of one experiment: its files read and its defaults built once
        exp = load_experiment(name, overrides, out_root)
        cell = build_job(compose([*exp.base_overrides(), *exp.cell_overrides(exp.start)])).cell
    device, size = cell.device_kind, f"{cell.height}x{cell.width}"
    history = History.scan(exp.ledger.out_roots())

    def from_history(steps: int) -> float | None:
        return seconds_per_sample(history, exp.model, cell.height, cell.width, device, steps)

    per_sample: PerSample
    if seconds_per_step is not None:
        per_sample, source = (lambda steps: steps * seconds_per_step), f"{seconds_per_step:g} s a step, as given"
    elif from_history(exp.default_steps) is not None:
        per_sample, source = from_history, f"each sample costed from {exp.model}'s renders at {size} on {device}"
    else:
        per_sample = lambda steps: None  # noqa: E731
        source = (f"no render of {exp.model} at {size} on {device} yet: render a few samples there (`python -m render "
                  f"model={exp.model} height={cell.height} width={cell.width} prompts.limit=3 render_anchor=false`: "
                  "the first is its warm-up) or give --seconds-per-step S")
    return plan_climb(exp, budget_state(exp), per_sample, device, source)
