"""The speed half of the climb's choice of incumbent: which cell is faster beyond noise (pure).

Two cells compare on speed over the rung prompts both have, paired by prompt (assess.stats.speed_ratio:
the geometric mean of the per-prompt latency ratios with a t interval at `experiment.speed.confidence`,
widened by each cell's noise figure, the drift of its job's reference timing). Among the candidates
(the cells at parity; when none is, the plausible ones):

1. a candidate is *outpaced* when another candidate is faster than it beyond that interval;
2. the incumbent is the best quality (mean delta to the anchor) among the candidates nobody outpaces,
   that is the fastest cell and every cell within noise of it; then the lower median latency; then
   grid order.

So a cell displaces another on speed only when it is faster beyond the interval; within noise, the
better quality wins. A cell flagged noisy (its timing too noisy to rank it) outpaces nobody: it is
never crowned on speed alone, only on quality among the cells within noise of it. A cell without a
warm latency is outpaced by every cell that has one. The point estimate (median warm latency) still
orders promotions, the beam and the challengers: those only decide what is rendered next.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from assess.climb.evaluate import Evaluation
from assess.climb.plan import CellData, Coords, Plan
from assess.stats import SpeedRatio, speed_ratio


def _warm(plan: Plan, cell: CellData, rung: int) -> dict[str, Sequence[float]]:
    return {p: cell.latencies[p] for p in plan.dev_ids[:rung] if p in cell.latencies}


def compare(plan: Plan, a: CellData, ea: Evaluation, b: CellData, eb: Evaluation) -> SpeedRatio | None:
    """latency(a) / latency(b) on the prompts of the lower of their two rungs, with its interval."""
    rung = min(ea.rung, eb.rung)
    return speed_ratio(_warm(plan, a, rung), _warm(plan, b, rung), plan.speed_confidence, a.noise, b.noise)


def outpaces(plan: Plan, a: CellData, ea: Evaluation, b: CellData, eb: Evaluation) -> bool:
    """a is faster than b beyond noise; a cell flagged noisy outpaces nobody."""
    if a.noisy or ea.latency is None:
        return False
    if eb.latency is None:
        return True
    ratio = compare(plan, a, ea, b, eb)
    return ratio is not None and ratio.a_faster


def _point(plan: Plan, coords: Coords, e: Evaluation) -> tuple[float, int | tuple[int, ...]]:
    return (e.latency if e.latency is not None else math.inf, plan.grid_index(coords))


def choose(plan: Plan, candidates: Sequence[Coords], current: Mapping[Coords, Evaluation],
           cells: Mapping[Coords, CellData]) -> tuple[Coords, str]:
    """(the incumbent among the candidates, which rule chose it, in words)."""
    data = {c: cells.get(c) or CellData(c) for c in candidates}
    order = sorted(candidates, key=lambda c: _point(plan, c, current[c]))
    field = [c for c in order
             if not any(d != c and outpaces(plan, data[d], current[d], data[c], current[c]) for d in order)]
    field = field or order[:1]  # a cycle of "faster beyond noise" (prompt sets differ by rung): the point estimate
    best = min(field, key=lambda c: (-plan.goodness(current[c].mean), *_point(plan, c, current[c])))
    return best, _rule_text(plan, best, order, field, current, data)


def _rule_text(plan: Plan, best: Coords, order: Sequence[Coords], field: Sequence[Coords],
               current: Mapping[Coords, Evaluation], data: Mapping[Coords, CellData]) -> str:
    if len(order) == 1:
        return "the only candidate"
    noisy = [f"{plan.label(c)} is flagged noisy ({data[c].noisy}): not crowned on speed alone"
             for c in order if data[c].noisy and c != best and order.index(c) < order.index(best)]
    tail = "".join(f"; {n}" for n in noisy)
    if len(field) == 1:
        runner = next(c for c in order if c != best)
        ratio = compare(plan, data[best], current[best], data[runner], current[runner])
        return (f"on speed: faster beyond noise than {plan.label(runner)}"
                + (f" ({ratio.text()})" if ratio else "") + tail)
    rival = next(c for c in field if c != best)
    ratio = compare(plan, data[best], current[best], data[rival], current[rival])
    same = plan.goodness(current[best].mean) == plan.goodness(current[rival].mean)
    decided = "equal quality, the lower median latency decided" if same else (
        f"the better quality decided (Δ {current[best].mean:+.4g} against {current[rival].mean:+.4g})")
    within = ", ".join(plan.label(c) for c in field if c != best)
    return f"within noise of {within}" + (f" ({ratio.text()})" if ratio else "") + f": {decided}{tail}"
