"""The speed half of the climb's choice of incumbent: which cell is faster beyond noise (pure).

Two cells compare on speed over the rung prompts both have, paired by prompt (assess.statistics.compare.speed_ratio:
the geometric mean of the per-prompt latency ratios with a t interval at `experiment.speed.confidence`,
widened by each cell's noise figure, the drift of its job's reference timing), and on quality by the
paired difference of their deltas over those prompts, at the same confidence
(assess.statistics.compare.paired_difference). Among the candidates (the cells at parity; when none is, the
plausible ones):

1. a candidate is *outpaced* when another candidate is faster than it beyond the speed interval;
   the cells nobody outpaces are the fastest and every cell within noise of it;
2. among those, a cell whose quality another one beats beyond the quality interval drops out: within
   noise on speed, the better quality wins;
3. among what is left (within noise on both legs), the lower median warm latency, then grid order:
   the best estimate, which the reasons call a choice within noise.

So a cell displaces another on speed only when it is faster beyond the interval. A cell flagged noisy
(its timing too noisy to rank it) outpaces nobody: it is never crowned on speed alone, only when no
other cell is left after the quality step, or by its quality. A cell without a warm latency is
outpaced by every cell that has one. The point estimate (median warm latency) still orders
promotions, the beam and the challengers: those only decide what is rendered next.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from assess.climb.evaluate import Evaluation
from assess.climb.plan import CellData, Coords, Plan
from assess.statistics.compare import CONFIDENCE, Estimate, SpeedRatio, paired_difference, speed_ratio


def _warm(plan: Plan, cell: CellData, rung: int) -> dict[str, Sequence[float]]:
    values = plan.per_image(cell)
    return {p: values[p] for p in plan.dev_ids[:rung] if p in values}


def timed_together(plan: Plan, a: CellData, b: CellData) -> SpeedRatio | None:
    """objective(a) / objective(b) from the rounds of a session that timed the two side by side, if one did (the
    latency ratio, times the ratio of their widths under gpu_seconds)."""
    figure = a.side_by_side.get(b.cell_key) if b.cell_key else None
    if figure is None:
        return None
    value, low, high, rounds = figure
    k = plan.width_ratio(a, b)
    return SpeedRatio(value * k, None if low is None else low * k, None if high is None else high * k, rounds,
                      CONFIDENCE, basis="side-by-side round(s)")


def compare(plan: Plan, a: CellData, ea: Evaluation, b: CellData, eb: Evaluation) -> SpeedRatio | None:
    """objective(a) / objective(b) (plan.per_image): from side-by-side rounds when the two were timed so, else on the render-time
    latencies of the prompts of the lower of their two rungs; with its interval."""
    together = timed_together(plan, a, b)
    if together is not None:
        return together
    rung = min(ea.rung, eb.rung)
    return speed_ratio(_warm(plan, a, rung), _warm(plan, b, rung), plan.speed_confidence, a.noise, b.noise)


def outpaces(plan: Plan, a: CellData, ea: Evaluation, b: CellData, eb: Evaluation) -> bool:
    """a is faster than b beyond noise; a cell flagged noisy outpaces nobody, unless the two were timed side by
    side (one process, interleaved rounds: the noise of its render is not in that figure)."""
    together = timed_together(plan, a, b)
    if together is not None:
        return together.a_faster
    if a.noisy or ea.latency is None:
        return False
    if eb.latency is None:
        return True
    ratio = compare(plan, a, ea, b, eb)
    return ratio is not None and ratio.a_faster


def quality_beats(plan: Plan, a: CellData, ea: Evaluation, b: CellData, eb: Evaluation) -> Estimate | None:
    """The paired difference of a's and b's quality (turned so that higher is better) when a's is better beyond
    its interval, else None."""
    rung = min(ea.rung, eb.rung)
    prompts = plan.dev_ids[:rung]
    sign = 1.0 if plan.higher_is_better else -1.0
    diff = paired_difference({p: sign * a.deltas[p] for p in prompts if p in a.deltas},
                             {p: sign * b.deltas[p] for p in prompts if p in b.deltas}, plan.speed_confidence)
    return diff if diff is not None and diff.low is not None and diff.low > 0 else None


def _point(plan: Plan, coords: Coords, e: Evaluation) -> tuple[float, tuple[int, ...]]:
    return (e.latency if e.latency is not None else math.inf, plan.grid_index(coords))


def untimed_rivals(plan: Plan, best: Coords, candidates: Sequence[Coords], current: Mapping[Coords, Evaluation],
                   cells: Mapping[Coords, CellData]) -> list[Coords]:
    """The candidates within noise of `best` on speed (neither outpaces the other) that were never timed side by
    side with it: before crowning `best` over them, time them together (assess.climb.generation)."""
    data = {c: cells.get(c) or CellData(c) for c in candidates}
    b = data[best]
    return [c for c in candidates if c != best and data[c].cell_key and b.cell_key
            and timed_together(plan, b, data[c]) is None and current[c].latency is not None
            and not outpaces(plan, b, current[best], data[c], current[c])
            and not outpaces(plan, data[c], current[c], b, current[best])]


def choose(plan: Plan, candidates: Sequence[Coords], current: Mapping[Coords, Evaluation],
           cells: Mapping[Coords, CellData]) -> tuple[Coords, str]:
    """(the incumbent among the candidates, which rule chose it, in words)."""
    data = {c: cells.get(c) or CellData(c) for c in candidates}
    order = sorted(candidates, key=lambda c: _point(plan, c, current[c]))
    field = [c for c in order
             if not any(d != c and outpaces(plan, data[d], current[d], data[c], current[c]) for d in order)]
    field = field or order[:1]  # a cycle of "faster beyond noise" (prompt sets differ by rung): the point estimate
    beaten = {c: next((d for d in field if d != c and quality_beats(plan, data[d], current[d], data[c], current[c])),
                      None) for c in field}
    left = [c for c in field if beaten[c] is None] or field
    best = left[0]  # `field` keeps the point order
    return best, _rule_text(plan, best, order, field, left, current, data)


def _rule_text(plan: Plan, best: Coords, order: Sequence[Coords], field: Sequence[Coords], left: Sequence[Coords],
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
    within = ", ".join(plan.label(c) for c in field if c != best)
    text = f"within noise of {within} on speed" + (f" ({ratio.text()})" if ratio else "")
    worse = [c for c in field if c not in left]
    if worse:
        text += (f": the better quality decided (Δ {current[best].mean:+.4g} against "
                 + ", ".join(f"{current[c].mean:+.4g} for {plan.label(c)}" for c in worse) + ")")
    if len(left) > 1:
        tied = ", ".join(plan.label(c) for c in left if c != best)
        text += f"{';' if worse else ':'} within noise on quality too of {tied}: the lower median latency decided"
    return text + tail
