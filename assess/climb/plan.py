"""The climb's vocabulary: the plan of an experiment, the per-cell data a decision reads, the proposals and
the decision it makes, and the small predicates every part of the climb shares (assess.climb.decide decides,
assess.climb.combine combines levers; both build on this module).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assess.statistics.categories import MIN_PROMPTS
from assess.climb.evaluate import Evaluation
from assess.statistics.compare import Verdict
from render.laws.gpu_budget import Budget
from render.laws.rule import SPEED_CONFIDENCE, Objective
from render.rundir.states import Name



class ProposalKind(Name):
    """Why a cell is proposed at a rung."""

    START = "start"  # the incumbent has no samples yet
    NEIGHBOUR = "neighbour"  # a one-factor move around the incumbent
    PROMOTION = "promotion"  # a survivor of a rung climbs to the next
    INCUMBENT = "incumbent"  # the incumbent climbs a rung to confirm parity
    COMBINATION = "combination"  # the best moves combined (assess/climb/combine.py)


class IncumbentStatus(Name):
    """How far the incumbent stands: at parity on the top rung, at parity below it, plausible only, or the start."""

    CONFIRMED = "confirmed"
    PARITY = "parity"
    PROVISIONAL = "provisional"
    START = "start"


Coords = tuple[str, ...]
Family = tuple[str, str]  # (axis, value)
# (cell, its steps, samples) -> device seconds, None when unknown; the cell is None for the anchor
Estimator = Callable[["Coords | None", int, int], "float | None"]


def split_categories(file: str) -> dict[str, str | None]:
    """prompt id -> category of a split's manifest (the suite's labels; None where it has none)."""
    from render.compose.splits import load_prompts

    return {p.id: p.category for p in load_prompts(file)}


@dataclass(frozen=True)
class Plan:
    """The pure part of an experiment: what decide needs."""

    axes: dict[str, tuple[str, ...]]
    start: Coords
    rungs: tuple[int, ...]
    eta: int
    band: float
    alpha: float
    higher_is_better: bool
    dev_ids: tuple[str, ...]
    n_seeds: int = 1
    default_steps: int = 0
    anchor_steps: int = 0
    holdout_n: int = 0  # holdout prompts: what the final renders for the incumbent, the control and the anchor
    categories: Mapping[str, str | None] = field(default_factory=dict)  # dev prompt id -> its category in the suite
    per_category: bool = False  # experiment.quality.per_category: parity needs every category in band
    category_min_prompts: int = MIN_PROMPTS  # experiment.quality.category_min_prompts
    speed_confidence: float = SPEED_CONFIDENCE  # experiment.speed.confidence: of "faster beyond noise"
    test: str = "noninferiority"  # experiment.quality.test in the rule in force (assess.statistics.compare.ParityTest)
    objective: Objective = Objective.latency  # experiment.objective in the rule in force: what "faster" means

    @classmethod
    def from_experiment(cls, exp: Any) -> Plan:
        quality = (getattr(exp, "conf", None) or {}).get("quality") or {}
        speed = (getattr(exp, "rule", None) or {}).get("speed") or {}  # the rule in force (render.laws.rule)
        return cls(axes=dict(exp.axes), start=exp.start, rungs=exp.rungs, eta=exp.eta, band=exp.quality.band,
                   alpha=exp.quality.alpha, higher_is_better=exp.quality.direction == "higher",
                   dev_ids=exp.dev.ids, n_seeds=len(exp.seeds), default_steps=exp.default_steps,
                   anchor_steps=int(exp.anchor["steps"]), holdout_n=len(exp.holdout.ids),
                   categories=split_categories(exp.dev.file), per_category=bool(quality.get("per_category", False)),
                   category_min_prompts=int(quality.get("category_min_prompts", MIN_PROMPTS)),
                   speed_confidence=float(speed.get("confidence", SPEED_CONFIDENCE)), test=str(exp.quality.test),
                   objective=Objective(str(exp.objective)))

    @property
    def top(self) -> int:
        return self.rungs[-1]

    def ordered(self, axis: str) -> bool:
        """A numeric axis: its neighbours are the adjacent values, in the order listed."""
        try:
            [float(v) for v in self.axes[axis]]
        except ValueError:
            return False
        return True

    def grid_index(self, coords: Coords) -> tuple[int, ...]:
        return tuple(values.index(v) if v in values else len(values) for values, v in
                     zip(self.axes.values(), coords, strict=True))

    def steps_of(self, coords: Coords) -> int:
        if "steps" in self.axes:
            return int(coords[list(self.axes).index("steps")])
        return self.default_steps

    def label(self, coords: Coords) -> str:
        return " ".join(f"{a}={v}" for a, v in zip(self.axes, coords, strict=True))

    def families_of(self, coords: Coords) -> list[Family]:
        return list(zip(self.axes, coords, strict=True))

    def per_image(self, cell: CellData) -> Mapping[str, Sequence[float]]:
        """The cell's warm latencies in the objective's units (gpu_seconds: times its width), per prompt: what every
        ranking of the climb reads, so its speed intervals scale with them."""
        if cell.per_image == 1 or self.objective is Objective.latency:
            return cell.latencies
        out = {}
        for p, xs in cell.latencies.items():  # each latency over the size of the call that rendered it (its record's)
            sizes = cell.call_sizes.get(p) or []
            sizes = sizes if len(sizes) == len(xs) else [cell.batch] * len(xs)
            out[p] = [self.objective.per_image(x, cell.width / (size or cell.batch)) for x, size in zip(xs, sizes, strict=True)]
        return out

    def width_ratio(self, a: CellData, b: CellData) -> float:
        """What a latency ratio a/b (timed side by side) is multiplied by to be the objective's ratio."""
        return self.objective.per_image(1.0, a.per_image) / self.objective.per_image(1.0, b.per_image)

    def goodness(self, delta: float | None) -> float:
        """Quality delta turned so that higher is better (-inf when unknown)."""
        if delta is None:
            return -math.inf
        return delta if self.higher_is_better else -delta


@dataclass(frozen=True)
class CellData:
    """What the index holds for one cell of the grid, on the dev split."""

    coords: Coords
    cell_key: str | None = None
    rendered: frozenset[str] = frozenset()  # dev prompt ids whose every seed is rendered
    deltas: Mapping[str, float] = field(default_factory=dict)  # prompt id -> quality delta (mean over seeds)
    latencies: Mapping[str, Sequence[float]] = field(default_factory=dict)  # prompt id -> warm latencies, s
    unscored: frozenset[str] = frozenset()  # rendered prompts without a quality score yet
    unavailable: Mapping[str, str] = field(default_factory=dict)  # prompt id -> why its quality is unavailable
    failed: str | None = None  # "category: message" of a failed run
    blocked_from: int | None = None  # smallest prompt count at which a run failed for good (not cancelled/timeout)
    is_anchor: bool = False  # the anchor's own cell: evaluated and drawn, never promoted (the reference is frozen)
    idle_cache: str | None = None  # a cache cell whose samples never reused a step: its engagement line (speed_notes)
    noise: float | None = None  # relative noise figure of its timing (its job's reference drift; 0.08 = 8 %)
    noisy: str | None = None  # why its timing is too noisy to rank it (None: it is not): never crowned on speed
    # other cell key -> (latency of this cell / the other's, low, high, rounds) from the latest session that timed
    # the two side by side (assess.statistics.side_by_side): what decides between them on speed, when there is one
    side_by_side: Mapping[str, tuple[float, float | None, float | None, int]] = field(default_factory=dict)
    same_work_as: Coords | None = None  # an earlier cell (grid order) whose images it reproduces byte for byte
    drift: str | None = None  # a parallel cell outside the band against its width-1 twin (assess.statistics.parity): never crowned
    width: int = 1  # the GPUs the cell holds (its parallel value)
    batch: int = 1  # samples per call: the objective gpu_seconds ranks latency x width / batch (GPUs an image holds)
    # prompt -> the size of the call behind each of its latencies (the record's batch: a rung that does not fill the
    # batch renders smaller calls, and an image of a call of 2 costs half the call, not a quarter)
    call_sizes: Mapping[str, Sequence[int]] = field(default_factory=dict)

    @property
    def per_image(self) -> float:
        """The GPUs each image holds for the cell's latency: what GPU-seconds per image multiply it by."""
        return self.width / self.batch


@dataclass(frozen=True)
class BudgetState:
    """The experiment's budget (render.laws.gpu_budget) with what is spent and what the final is estimated to cost."""

    budget: Budget
    spent_s: float
    final_s: float | None = None  # the final's estimated cost for the current incumbent (set by decide)

    @property
    def limit_s(self) -> float:
        return self.budget.limit_s

    @property
    def reserve_s(self) -> float:
        return self.budget.reserve_s

    @property
    def price_per_gpu_hour(self) -> float | None:
        return self.budget.price_per_gpu_hour

    @property
    def kept_s(self) -> float:
        """Kept back for the final: the reserve, or the final's estimate with its margin when that is larger (the
        law's figure, render.laws.gpu_budget.Budget.kept_s, which every launch's admission reads from the ledger)."""
        return self.budget.kept_s(self.final_s)

    @property
    def left_s(self) -> float:
        """What navigation may still spend: the limit minus what is kept for the final minus what is spent."""
        return self.limit_s - self.kept_s - self.spent_s


@dataclass(frozen=True)
class Proposal:
    coords: Coords
    rung: int  # prompts.limit
    kind: ProposalKind
    reason: str
    est_s: float | None = None
    axis: str | None = None  # a neighbour's moved axis

    def as_dict(self, plan: Plan) -> dict[str, Any]:
        return {"cell": dict(zip(plan.axes, self.coords, strict=True)), "rung": self.rung, "kind": self.kind,
                "reason": self.reason, "est_s": self.est_s}


@dataclass
class Decision:
    generation: int
    evaluations: dict[int, dict[Coords, Evaluation]]  # rung -> cell -> evaluation (Wilcoxon Holm within the rung)
    current: dict[Coords, Evaluation]  # cell -> evaluation at its highest scored rung
    reached: dict[Coords, int]  # cell -> highest rung rendered
    incumbent: Coords
    incumbent_status: IncumbentStatus
    frontier: list[Coords]
    flat: list[Family]
    pruned: list[Family]
    newly_pruned: list[Family]
    proposals: list[Proposal]
    dropped: list[tuple[Proposal, str]]
    stop: str | None
    reasons: list[str]
    note: str = ""
    est_s: float | None = None  # estimated cost of the proposals (None: no history to estimate from)
    budget: BudgetState | None = None  # with the final's estimate
    speed_rule: str = ""  # which rule chose the incumbent: speed beyond noise, quality within noise, or alone
    untimed: list[Coords] = field(default_factory=list)  # cells within noise of the incumbent on speed that were
    # never timed side by side with it: `assess climb --apply` times them before it crowns (assess.climb.generation)


# -- rungs and evaluations ------------------------------------------------------------------


def reached(plan: Plan, cell: CellData) -> int:
    """The highest rung whose prompts are all rendered (0: not even the first)."""
    best = 0
    for rung in plan.rungs:
        if set(plan.dev_ids[:rung]) <= cell.rendered:
            best = rung
    return best


def scored_rungs(plan: Plan, cell: CellData) -> list[int]:
    top = reached(plan, cell)
    return [r for r in plan.rungs if r <= top and not (set(plan.dev_ids[:r]) & cell.unscored)]


def plausible(plan: Plan, e: Evaluation) -> bool:
    """Could still be at parity: at parity, or undecided with its mean inside the band below the top rung."""
    if e.verdict == Verdict.PARITY:
        return True
    if e.verdict != Verdict.UNDECIDED or e.mean is None or e.rung >= plan.top:
        return False
    inside = abs(e.mean) <= plan.band if plan.test == "equivalence" else plan.goodness(e.mean) >= -plan.band
    return inside


def idle_rules_out(plan: Plan, coords: Coords, cells: Mapping[Coords, CellData]) -> Coords | None:
    """A cell whose cache never engaged and that rules `coords` out: `coords` itself, or a cell with the same
    cache whose other axes are equal except for more (or as many) steps and a higher (or equal) threshold: a
    cache that does not engage there engages no more with fewer steps (larger changes between steps) or a
    lower threshold."""
    axes = list(plan.axes)
    if "cache" not in axes:
        return None
    for other, cell in cells.items():
        if cell.idle_cache is None or other[axes.index("cache")] != coords[axes.index("cache")]:
            continue
        if all(mine == theirs or (axis == "steps" or axis.endswith("threshold")) and _at_most(mine, theirs)
               for axis, mine, theirs in zip(axes, coords, other, strict=True)):
            return other
    return None


def _at_most(mine: str, theirs: str) -> bool:
    try:
        return float(mine) <= float(theirs)
    except ValueError:
        return False


def _blocked(cell: CellData | None, rung: int) -> bool:
    """A cell that failed for good at this rung, or drifts from one GPU (never promoted: it cannot be crowned)."""
    return cell is not None and (cell.drift is not None or (cell.blocked_from is not None and rung >= cell.blocked_from))

