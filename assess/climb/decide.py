"""One generation of the hill climb, decided from per-cell tables (pure: no index, no files).

`decide(plan, cells, history, budget)` is all `assess climb` and benchmarks/climb.py run:

1. Evaluate every cell at every rung it has rendered and scored (assess.climb.evaluate: parity by
   TOST, the Wilcoxon test Holm-adjusted across the cells of each rung); a cell's *current*
   evaluation is at its highest such rung.
2. The frontier: cells not out of band, Pareto-minimal in (median warm latency, quality loss).
3. The incumbent: the fastest cell at parity ("confirmed" at the top rung, else "parity"); when
   none is, the fastest plausible one (undecided, mean delta inside the band, below the top rung:
   "provisional"); else the start cell ("start"). Fastest means beyond noise (assess.climb.speed_choice:
   a paired speed interval over the prompts, widened by the cells' noise figures); among the cells
   within noise of the fastest, the better quality (beyond its paired interval) wins, else the lower
   median latency, then grid order; a cell flagged noisy is never crowned on speed alone. The
   reasons say which rule chose.
4. Families, the values of categorical axes (a cache method, a scheduler) off the incumbent's: one
   that had evaluated cells but none on the frontier at two decisions in a row is pruned (for good,
   unless the incumbent takes that value): none of its cells is promoted or proposed again.
5. Promotions, successive halving: at each rung, the best ceil(n/eta) of the n cells evaluated
   there (plausible first, then by latency; the anchor's own cell is no candidate) move to the
   next rung unless they are there already;
   cells out of band never move; the incumbent always climbs one rung, to confirm its parity; once
   parity is confirmed at the top rung, no slower cell is promoted (it could not win) and every
   faster cell not out of band climbs, whatever its rank (a challenger).
6. The one-factor sweep: the incumbent's neighbours on each axis (adjacent values on a numeric
   axis, every other value on a categorical one) that have no samples yet, at the first rung; when
   they are all tried, those of the next fastest plausible cell (a beam of at most eta centres).
7. Stop when the budget is down to what is kept for the final (the reserve, or the final's
   estimated cost if larger); or the frontier did not move over the last two generations; or
   parity is confirmed at the top rung and nothing is left to try; or nothing is left to propose.
   Proposals whose estimated cost does not fit in what is left are dropped, in priority order.

A cell already rendered at a rung is never proposed at that rung again; a cell whose run failed
(not cancelled or timed out) is not proposed again at that rung or above. A cache cell whose samples
never reused a step (its cache never engaged) is not promoted, and no cell with the same cache at as many
or fewer steps and as high or a lower threshold (other axes equal) is proposed: it would render what
cache=none renders, at the hooks' cost (the reasons say so).

Longer than the house's ~300 lines: the seven steps below are one decision, each its own small
function; the vocabulary lives in assess.climb.plan and the combinations in assess.climb.combine.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from assess.statistics.categories import warning
from assess.climb.evaluate import Evaluation, correct, evaluate
from assess.climb.plan import (BudgetState, CellData, Coords, Decision, Estimator, Family, IncumbentStatus,  # noqa: F401
                               Plan, Proposal, ProposalKind, _blocked, idle_rules_out, plausible, reached, scored_rungs)
from assess.statistics.compare import Verdict, pareto_front

def evaluate_cells(plan: Plan, cells: Mapping[Coords, CellData]) -> dict[int, dict[Coords, Evaluation]]:
    by_rung: dict[int, dict[Coords, Evaluation]] = {}
    for rung in plan.rungs:
        raw = {c: evaluate(d.deltas, plan.per_image(d), plan.dev_ids[:rung], plan.band, plan.categories,
                           plan.category_min_prompts, plan.test, plan.higher_is_better)
               for c, d in cells.items() if rung in scored_rungs(plan, d)}
        if raw:
            by_rung[rung] = {k: v for k, v in correct(raw, plan.alpha, plan.per_category).items()}
    return by_rung


def current_evaluations(evaluations: Mapping[int, Mapping[Coords, Evaluation]]) -> dict[Coords, Evaluation]:
    current: dict[Coords, Evaluation] = {}
    for rung in sorted(evaluations):
        current.update(evaluations[rung])
    return current


def _speed_key(plan: Plan, coords: Coords, e: Evaluation) -> tuple[Any, ...]:
    latency = e.latency if e.latency is not None else math.inf
    return (latency, -plan.goodness(e.mean), plan.grid_index(coords))


# -- incumbent and frontier -----------------------------------------------------------------


def choose_incumbent(plan: Plan, current: Mapping[Coords, Evaluation], cells: Mapping[Coords, CellData]
                     ) -> tuple[Coords, IncumbentStatus, str, list[Coords]]:
    """(incumbent, status, the rule that chose it, the rivals within noise never timed side by side with it): among
    the cells at parity, else the plausible ones, the fastest beyond noise, or within noise the better quality
    (assess.climb.speed_choice)."""
    from assess.climb.speed_choice import choose, untimed_rivals

    eligible = {c: e for c, e in current.items() if not (c in cells and cells[c].drift)}  # parallel-drift: never crowned
    at_parity = [c for c, e in eligible.items() if e.verdict == Verdict.PARITY]
    candidates = at_parity or [c for c, e in eligible.items() if plausible(plan, e)]
    if not candidates:
        return plan.start, IncumbentStatus.START, "", []
    best, rule = choose(plan, candidates, current, cells)
    status = ((IncumbentStatus.CONFIRMED if current[best].rung == plan.top else IncumbentStatus.PARITY) if at_parity
              else IncumbentStatus.PROVISIONAL)
    return best, status, rule, untimed_rivals(plan, best, candidates, current, cells)


def frontier(plan: Plan, current: Mapping[Coords, Evaluation]) -> list[Coords]:
    """Cells not out of band that no other such cell beats on both latency and quality."""
    points = [(c, e.latency, plan.goodness(e.mean)) for c, e in current.items()
              if e.verdict not in (Verdict.OUT, Verdict.NO_DATA) and e.latency is not None and e.mean is not None]
    front = [points[i][0] for i in pareto_front([(lat, good) for _, lat, good in points], maximize=(False, True))]
    return sorted(front, key=lambda c: _speed_key(plan, c, current[c]))


def families_flat(plan: Plan, current: Mapping[Coords, Evaluation], front: Sequence[Coords],
                  incumbent: Coords) -> list[Family]:
    """Families (a value of a categorical axis: a cache method, a scheduler) with evaluated cells, none on
    the frontier, that the incumbent does not belong to. Numeric axes (steps) have no families: a step
    count is only good or bad together with the other axes."""
    own = set(plan.families_of(incumbent))
    seen = {f for c in current for f in plan.families_of(c) if not plan.ordered(f[0])}
    on_front = {f for c in front for f in plan.families_of(c)}
    return sorted(f for f in seen - on_front - own)


def prune(plan: Plan, flat: Sequence[Family], history: Sequence[Mapping[str, Any]], incumbent: Coords
          ) -> tuple[list[Family], list[Family]]:
    """(pruned, newly pruned): flat now and at the previous decision, or pruned before; never the incumbent's."""
    previous = history[-1] if history else {}
    before = {tuple(f) for f in previous.get("pruned", [])}
    flat_before = {tuple(f) for f in previous.get("flat", [])}
    new = sorted(f for f in flat if f in flat_before and f not in before)
    own = set(plan.families_of(incumbent))
    pruned = sorted((before | set(new)) - own)
    return pruned, [f for f in new if f not in own]


# -- proposals ------------------------------------------------------------------------------


def promotions(plan: Plan, evaluations: Mapping[int, Mapping[Coords, Evaluation]], cells: Mapping[Coords, CellData],
               reach: Mapping[Coords, int], pruned: set[Family], ceiling: float | None) -> list[Proposal]:
    """Successive halving: the best ceil(n/eta) of each rung's n cells, not yet at the next rung."""
    out: list[Proposal] = []
    for rung, following in zip(plan.rungs, plan.rungs[1:], strict=False):
        cohort = {c: e for c, e in evaluations.get(rung, {}).items() if not (c in cells and cells[c].is_anchor)}
        if not cohort:
            continue
        ranked = sorted(cohort, key=lambda c: (not plausible(plan, cohort[c]), *_speed_key(plan, c, cohort[c])))
        quota = math.ceil(len(ranked) / plan.eta)
        for position, coords in enumerate(ranked[:quota], start=1):
            e = cohort[coords]
            if e.verdict in (Verdict.OUT, Verdict.NO_DATA) or reach.get(coords, 0) >= following:
                continue
            if set(plan.families_of(coords)) & pruned or _blocked(cells.get(coords), following):
                continue
            if ceiling is not None and (e.latency is None or e.latency >= ceiling):
                continue
            out.append(Proposal(coords, following, ProposalKind.PROMOTION,
                                f"promoted: rank {position} of {len(ranked)} at rung {rung} (top {quota})"))
    return out


def neighbours(plan: Plan, incumbent: Coords) -> list[tuple[str, Coords]]:
    """(axis, cell): one-factor moves around the incumbent."""
    out = []
    for i, (axis, values) in enumerate(plan.axes.items()):
        position = values.index(incumbent[i])
        if plan.ordered(axis):
            others = [values[j] for j in (position - 1, position + 1) if 0 <= j < len(values)]
        else:
            others = [v for v in values if v != incumbent[i]]
        out += [(axis, incumbent[:i] + (v,) + incumbent[i + 1:]) for v in others]
    return out


def _moves(plan: Plan, centre: Coords, cells: Mapping[Coords, CellData], reach: Mapping[Coords, int],
           pruned: set[Family]) -> list[tuple[str, Coords]]:
    """(axis, cell): the centre's untried one-factor moves (not rendered, not failed, not pruned)."""
    first = plan.rungs[0]
    return [(axis, c) for axis, c in neighbours(plan, centre)
            if reach.get(c, 0) < first and not _blocked(cells.get(c), first) and not set(plan.families_of(c)) & pruned
            and idle_rules_out(plan, c, cells) is None]


def sweep_proposals(plan: Plan, incumbent: Coords, current: Mapping[Coords, Evaluation],
                    cells: Mapping[Coords, CellData], reach: Mapping[Coords, int], pruned: set[Family]
                    ) -> list[Proposal]:
    """The one-factor sweep around the incumbent; once its neighbours are all tried, around the next
    fastest candidates (plausible cells, at most eta of them in all: a narrow beam out of local optima)."""
    first = plan.rungs[0]
    if reach.get(incumbent, 0) < first and not _blocked(cells.get(incumbent), first):
        start = [Proposal(incumbent, first, ProposalKind.START, "the incumbent has no samples yet")]
    else:
        start = []
    beam = [incumbent] + sorted((c for c, e in current.items() if c != incumbent and plausible(plan, e)),
                                key=lambda c: _speed_key(plan, c, current[c]))[:plan.eta - 1]
    for rank, centre in enumerate(beam):
        moves = _moves(plan, centre, cells, reach, pruned)
        if moves:
            where = "the incumbent" if rank == 0 else f"{plan.label(centre)} (the incumbent's moves are all tried)"
            return start + [Proposal(c, first, ProposalKind.NEIGHBOUR, f"one-factor move on {axis} around {where}", axis=axis)
                            for axis, c in moves]
    return start


def _incumbent_promotion(plan: Plan, incumbent: Coords, status: IncumbentStatus, reach: Mapping[Coords, int],
                         cells: Mapping[Coords, CellData]) -> list[Proposal]:
    if status not in (IncumbentStatus.PARITY, IncumbentStatus.PROVISIONAL):
        return []
    higher = [r for r in plan.rungs if r > reach.get(incumbent, 0)]
    if not higher or _blocked(cells.get(incumbent), higher[0]):
        return []
    return [Proposal(incumbent, higher[0], ProposalKind.INCUMBENT, f"the incumbent ({status}) climbs a rung to confirm parity")]


def challengers(plan: Plan, current: Mapping[Coords, Evaluation], cells: Mapping[Coords, CellData],
                reach: Mapping[Coords, int], pruned: set[Family], ceiling: float | None) -> list[Proposal]:
    """Once parity is confirmed at the top rung, every cell faster than the incumbent that is not out of
    band climbs a rung, whatever its rank: only such a cell can still take the incumbent's place."""
    if ceiling is None:
        return []
    out = []
    for coords, e in sorted(current.items(), key=lambda ce: _speed_key(plan, ce[0], ce[1])):
        if e.verdict in (Verdict.OUT, Verdict.NO_DATA) or e.latency is None or e.latency >= ceiling:
            continue
        higher = [r for r in plan.rungs if r > reach.get(coords, 0)]
        cell = cells.get(coords)
        if not higher or (cell is not None and cell.is_anchor) or set(plan.families_of(coords)) & pruned \
                or _blocked(cell, higher[0]):
            continue
        out.append(Proposal(coords, higher[0], ProposalKind.PROMOTION,
                            f"challenger: faster than the confirmed incumbent and not out of band at rung {e.rung}"))
    return out


def _dedupe(proposals: Sequence[Proposal]) -> list[Proposal]:
    seen: set[tuple[Coords, int]] = set()
    out = []
    for p in proposals:
        if (p.coords, p.rung) not in seen:
            seen.add((p.coords, p.rung))
            out.append(p)
    return out


# -- cost -----------------------------------------------------------------------------------


def fit_budget(plan: Plan, proposals: Sequence[Proposal], cells: Mapping[Coords, CellData],
               anchor_rendered: frozenset[str], budget: BudgetState, estimate: Estimator | None
               ) -> tuple[list[Proposal], list[tuple[Proposal, str]], float | None]:
    """Keep proposals, in priority order, while their estimated cost fits in what is left."""
    if estimate is None:
        return list(proposals), [], None
    kept: list[Proposal] = []
    dropped: list[tuple[Proposal, str]] = []
    anchor_has = set(anchor_rendered)
    total = 0.0
    unknown = False
    for p in proposals:
        cell = cells.get(p.coords)
        prompts = plan.dev_ids[:p.rung]
        new = [q for q in prompts if cell is None or q not in cell.rendered]
        anchor_new = [q for q in prompts if q not in anchor_has]
        cost_cell = estimate(p.coords, plan.steps_of(p.coords), len(new) * plan.n_seeds)
        cost_anchor = estimate(None, plan.anchor_steps, len(anchor_new) * plan.n_seeds) if anchor_new else 0.0
        if cost_cell is None or cost_anchor is None:
            unknown = True
            kept.append(p)
            anchor_has |= set(anchor_new)
            continue
        cost = cost_cell + cost_anchor
        if total + cost > budget.left_s:
            left = max(budget.left_s - total, 0)
            dropped.append((p, f"estimated {cost:.0f} s does not fit in the {left:.0f} s left"))
            continue
        total += cost
        kept.append(replace(p, est_s=round(cost, 6)))
        anchor_has |= set(anchor_new)
    return kept, dropped, None if unknown else total


CONTROL: Coords = ("<steps-only control>",)  # the estimator's name for the final's control cell


def final_cost(plan: Plan, incumbent: Coords, estimate: Estimator | None) -> float | None:
    """The final's estimated cost: the incumbent, the steps-only control and the anchor on the holdout."""
    if estimate is None or not plan.holdout_n:
        return None
    n = plan.holdout_n * plan.n_seeds
    steps = plan.steps_of(incumbent)
    parts = [estimate(incumbent, steps, n), estimate(CONTROL, steps, n), estimate(None, plan.anchor_steps, n)]
    return None if any(p is None for p in parts) else sum(parts)  # type: ignore[arg-type]


# -- the decision ---------------------------------------------------------------------------


def state_fingerprint(plan: Plan, cells: Mapping[Coords, CellData]) -> str:
    """What the decision was made from: changes whenever a cell gains samples, scores or a failure."""
    items = sorted(
        (list(c), sorted(d.rendered), sorted(d.deltas), sorted(d.unavailable), d.blocked_from)
        for c, d in cells.items()
    )
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()[:16]


def _stalled(front: Sequence[Coords], history: Sequence[Mapping[str, Any]]) -> bool:
    if len(history) < 2:
        return False
    now = sorted(list(c) for c in front)
    return all(sorted(record.get("frontier", [])) == now for record in history[-2:]) and bool(now)


def decide(plan: Plan, cells: Mapping[Coords, CellData], history: Sequence[Mapping[str, Any]],
           budget: BudgetState, estimate: Estimator | None = None,
           anchor_rendered: frozenset[str] = frozenset()) -> Decision:
    """Decide one generation from the cells' dev-split tables and the recorded generations."""
    evaluations = evaluate_cells(plan, cells)
    current = current_evaluations(evaluations)
    reach = {c: reached(plan, d) for c, d in cells.items()}
    # a cache cell that never engaged renders what cache=none renders, and a cell that reproduces an earlier one byte
    # for byte did its work: their latency differences are noise, never a win (the earlier cell stands for both)
    incumbent, status, speed_rule, untimed = choose_incumbent(
        plan, {c: e for c, e in current.items() if not (c in cells and (cells[c].idle_cache or (
            cells[c].same_work_as is not None and cells[c].same_work_as in current)))}, cells)
    front = frontier(plan, current)
    flat = families_flat(plan, current, front, incumbent)
    pruned, newly = prune(plan, flat, history, incumbent)
    ceiling = current[incumbent].latency if status == IncumbentStatus.CONFIRMED else None
    pruned_set = set(pruned)
    sweep = sweep_proposals(plan, incumbent, current, cells, reach, pruned_set)
    if not sweep:  # one-factor moves exhausted: try the best moves of several axes together (levers interact)
        from assess.climb.combine import combination_proposals

        sweep = combination_proposals(plan, incumbent, current, cells, reach)
    proposals = _dedupe(_incumbent_promotion(plan, incumbent, status, reach, cells)
                        + promotions(plan, evaluations, cells, reach, pruned_set, ceiling)
                        + challengers(plan, current, cells, reach, pruned_set, ceiling)
                        + sweep)
    proposals = [p for p in proposals if p.kind == ProposalKind.INCUMBENT or idle_rules_out(plan, p.coords, cells) is None]
    decision = Decision(len(history) + 1, evaluations, current, reach, incumbent, status, front, flat, pruned, newly,
                        [], [], None, [], speed_rule=speed_rule, untimed=untimed)
    decision.reasons += _reasons(plan, decision) + _idle_reasons(plan, cells)
    budget = replace(budget, final_s=final_cost(plan, incumbent, estimate))
    decision.budget = budget
    if budget.left_s <= 0:
        decision.stop = (f"budget: {budget.spent_s / 3600:.4g} GPU-h spent, down to what is kept for the final "
                         f"({budget.kept_s / 3600:.4g} GPU-h: the reserve, or the final's estimate with its margin "
                         f"if larger){final_fits(budget)}")
    elif _stalled(front, history):
        decision.stop = "the frontier did not move over the last two generations"
    elif not proposals:
        decision.stop = ("parity confirmed at the top rung, nothing faster left to try" if status == IncumbentStatus.CONFIRMED
                         else "nothing left to propose, and no cell is at parity" if status == IncumbentStatus.START
                         else "nothing left to propose: every neighbour of the incumbent is tried or pruned")
    if decision.stop is None:
        kept, dropped, total = fit_budget(plan, proposals, cells, anchor_rendered, budget, estimate)
        decision.proposals, decision.dropped, decision.est_s = kept, dropped, total
        if not kept:
            decision.stop = f"budget: no proposal fits in the {budget.left_s:.0f} GPU-s left before the final's share"
    decision.note = design_note(plan, decision)
    return decision


def final_fits(budget: BudgetState) -> str:
    """Whether the final fits in what is left, and if not the budget an amendment must give it (the climb stops on
    budget before navigation spends what the final needs: this names what a budget too small from the start lacks)."""
    if budget.final_s is None:
        return ""
    left = budget.limit_s - budget.spent_s
    if budget.final_s <= left:
        return f"; the final fits (an estimated {budget.final_s / 3600:.4g} of the {left / 3600:.4g} GPU-h left)"
    needed = (budget.spent_s + budget.kept_s) / 3600
    return (f"; the final does not fit (an estimated {budget.final_s / 3600:.4g} GPU-h, {max(left, 0) / 3600:.4g} left): "
            f"raise experiment.budget.gpu_hours to {math.ceil(needed * 1000) / 1000:g} by a recorded amendment "
            "(assess climb <name> --set experiment.budget.gpu_hours=... --amend \"<why>\")")


def history_entry(plan: Plan, d: Decision, state: str) -> dict[str, Any]:
    """What later decisions read of this one (prune, stall, repeat); generation records hold it."""
    return {"generation": d.generation, "state": state, "frontier": [list(c) for c in d.frontier],
            "flat": [list(f) for f in d.flat], "pruned": [list(f) for f in d.pruned],
            "newly_pruned": [list(f) for f in d.newly_pruned], "proposals": [p.as_dict(plan) for p in d.proposals],
            "stop": d.stop, "speed_rule": d.speed_rule}


def _reasons(plan: Plan, d: Decision) -> list[str]:
    out = []
    e = d.current.get(d.incumbent)
    where = f" at rung {e.rung}" if e else ""
    out.append(f"incumbent ({d.incumbent_status}{where}): {plan.label(d.incumbent)}"
               + (f", chosen {d.speed_rule}" if d.speed_rule else ""))
    if d.untimed:
        out.append(f"within noise of {', '.join(plan.label(c) for c in d.untimed)} on speed and never timed side by "
                   "side with it: `assess climb --apply` times them together before choosing (or `assess retime` "
                   "their runs)")
    if d.frontier:
        out.append(f"frontier: {len(d.frontier)} cell(s), fastest {plan.label(d.frontier[0])}")
    if d.newly_pruned:
        out.append("pruned (off the frontier two generations running): "
                   + ", ".join(f"{a}={v}" for a, v in d.newly_pruned))
    for coords in dict.fromkeys([d.incumbent, *d.frontier]):
        e = d.current.get(coords)
        if e is not None and e.breaks and e.tost_p is not None and e.tost_p < plan.alpha:  # at parity overall
            note = warning(f"warning: {plan.label(coords)}", e.categories)
            out.append(f"{note} (experiment.quality.per_category: true makes this deny parity)" if not plan.per_category
                       else f"{note}: not at parity (experiment.quality.per_category)")
    return out


def _idle_reasons(plan: Plan, cells: Mapping[Coords, CellData]) -> list[str]:
    idle = [f"cache never engaged: {plan.label(c)} ({d.idle_cache}): not promoted, and no cell with its cache at as many "
            "or fewer steps and as high or a lower threshold is proposed" for c, d in sorted(cells.items()) if d.idle_cache]
    return idle + [f"same work: {plan.label(c)} renders byte-identical images to {plan.label(d.same_work_as)}: one result, "
                   "never ranked apart on speed" for c, d in sorted(cells.items())
                   if d.same_work_as is not None and not d.idle_cache]


def design_note(plan: Plan, d: Decision) -> str:
    head = f"g{d.generation}: incumbent {plan.label(d.incumbent)} ({d.incumbent_status})"
    if d.stop:
        return f"{head}; stop: {d.stop}"
    kinds = {k.value: sum(1 for p in d.proposals if p.kind == k) for k in ProposalKind}
    parts = []
    if kinds["start"]:
        parts.append("start")
    if kinds["incumbent"] or kinds["promotion"]:
        parts.append(f"promote {kinds['incumbent'] + kinds['promotion']}")
    if kinds["neighbour"]:
        axes = sorted({p.axis for p in d.proposals if p.kind == ProposalKind.NEIGHBOUR and p.axis})
        parts.append(f"sweep {'/'.join(axes)} ({kinds['neighbour']} cells)")
    if kinds["combination"]:
        parts.append(f"combine best moves ({kinds['combination']} cells)")
    if d.newly_pruned:
        parts.append("pruned " + ", ".join(f"{a}={v}" for a, v in d.newly_pruned))
    return f"{head}; " + "; ".join(parts)


# -- commands -------------------------------------------------------------------------------


def group_commands(plan: Plan, proposals: Sequence[Proposal]) -> list[tuple[int, dict[str, list[str]]]]:
    """Proposals as few one-factor multiruns as possible: (rung, {axis: values}) whose product is exactly the cells."""
    out: list[tuple[int, dict[str, list[str]]]] = []
    axes = list(plan.axes)
    for rung in sorted({p.rung for p in proposals}):
        todo = sorted({p.coords for p in proposals if p.rung == rung}, key=plan.grid_index)
        while todo:
            best_axis, best_group = 0, [todo[0]]
            for i in range(len(axes)):
                buckets: dict[Coords, list[Coords]] = {}
                for c in todo:
                    buckets.setdefault(c[:i] + c[i + 1:], []).append(c)
                group = max(buckets.values(), key=len)
                if len(group) > len(best_group):
                    best_axis, best_group = i, group
            values = {a: [best_group[0][j]] for j, a in enumerate(axes)}
            values[axes[best_axis]] = [c[best_axis] for c in best_group]
            out.append((rung, values))
            todo = [c for c in todo if c not in best_group]
    return out
