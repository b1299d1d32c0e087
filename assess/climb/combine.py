"""Combination moves: levers interact, so a climb that moves one factor at a time can miss the best cell.

Published figures show it (fp8 quantization is worth most together with compile; ParaAttention
raises FBCache's threshold under fp8): a pair can be good only together. Once the one-factor
sweep has nothing left to propose, the climb takes, for each axis, its best move: the value whose
one-factor moves measured anywhere in the grid (pairs of cells that differ on that axis only, the
moved one still plausibly at parity) cost the least latency relative to the incumbent's value,
even when that is a slow-down. It proposes the untried combinations of these best moves around the
incumbent, pairs first, then larger sets. Pruning is not applied to them: a value pruned because it
was slower alone is exactly what an interaction can redeem. A combination also gets its cache
threshold re-tuned: the threshold axis' neighbours of the combination are proposed with it. Every
proposal carries its reason, like every other decision.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping

from assess.climb.evaluate import Evaluation
from assess.climb.plan import CellData, Coords, Plan, Proposal, ProposalKind, _blocked, plausible

THRESHOLD_SUFFIX = "threshold"  # axes such as cache.threshold: re-tuned under a combination


def best_moves(plan: Plan, incumbent: Coords, current: Mapping[Coords, Evaluation]) -> dict[int, tuple[str, float]]:
    """Axis index -> (value, median latency ratio) of the axis' best measured move away from the incumbent's value."""
    ratios: dict[tuple[int, str], list[float]] = {}
    for moved, e in current.items():
        if not plausible(plan, e) or e.latency is None:
            continue
        for i, value in enumerate(moved):
            if value == incumbent[i]:
                continue
            base = current.get(moved[:i] + (incumbent[i],) + moved[i + 1:])
            if base is not None and base.latency:
                ratios.setdefault((i, value), []).append(e.latency / base.latency)
    best: dict[int, tuple[str, float]] = {}
    for (i, value), found in sorted(ratios.items()):
        ratio = statistics.median(found)
        if i not in best or ratio < best[i][1]:
            best[i] = (value, ratio)
    return best


def combination_proposals(plan: Plan, incumbent: Coords, current: Mapping[Coords, Evaluation],
                          cells: Mapping[Coords, CellData], reach: Mapping[Coords, int]) -> list[Proposal]:
    """The untried combinations of the best move on each axis, each with its reason (empty: nothing to combine)."""
    first = plan.rungs[0]
    axes = list(plan.axes)
    best = best_moves(plan, incumbent, current)

    def untried(coords: Coords) -> bool:
        return coords != incumbent and reach.get(coords, 0) < first and not _blocked(cells.get(coords), first)

    out: list[Proposal] = []
    for size in range(2, len(best) + 1):
        for subset in itertools.combinations(sorted(best), size):
            coords = tuple(best[i][0] if i in subset else v for i, v in enumerate(incumbent))
            what = ", ".join(f"{axes[i]}={best[i][0]} (x{best[i][1]:.2f} alone)" for i in subset)
            if untried(coords):
                out.append(Proposal(coords, first, ProposalKind.COMBINATION, f"combination of the best moves {what}: one-factor "
                                    "moves around the incumbent are exhausted, and levers interact"))
            for t, axis in enumerate(axes):  # re-tune a cache threshold under the combined levers
                if axis.endswith(THRESHOLD_SUFFIX) and t not in subset:
                    for value in _neighbour_values(plan, axis, coords[t]):
                        tuned = coords[:t] + (value,) + coords[t + 1:]
                        if untried(tuned):
                            out.append(Proposal(tuned, first, ProposalKind.COMBINATION, f"{axis} re-tuned to {value} under the "
                                                f"combination {what} (a cache's threshold moves with quantization and compile)"))
        if out:  # the smallest combinations first: larger ones once these are measured
            return out
    return out


def _neighbour_values(plan: Plan, axis: str, value: str) -> list[str]:
    values = plan.axes[axis]
    position = values.index(value)
    return [values[j] for j in (position - 1, position + 1) if 0 <= j < len(values)]
