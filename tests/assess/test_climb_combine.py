"""Combination moves (assess/climb/combine.py): the best move of each axis, combined around the incumbent."""

from __future__ import annotations

from assess.climb.combine import best_moves, combination_proposals
from assess.climb.decide import CellData, Coords, Plan, current_evaluations, evaluate_cells

IDS = tuple(f"p{i}" for i in range(6))


def plan(**axes: tuple[str, ...]) -> Plan:
    start = tuple(v[0] for v in axes.values())
    return Plan(axes=dict(axes), start=start, rungs=(6, 18), eta=3, band=0.02, alpha=0.05, higher_is_better=True,
                dev_ids=IDS, default_steps=28, anchor_steps=28)


def cell(coords: Coords, latency: float, delta: float = -0.001) -> CellData:
    deltas = {p: delta + 0.0005 * (i % 3 - 1) for i, p in enumerate(IDS)}
    return CellData(coords, "-".join(coords), frozenset(IDS), deltas, {p: [latency] for p in IDS})


def state(p: Plan, measured: dict[Coords, float]):
    cells = {c: cell(c, latency) for c, latency in measured.items()}
    return cells, current_evaluations(evaluate_cells(p, cells)), {c: 6 for c in cells}


def test_slow_alone_moves_are_combined_with_their_reason() -> None:
    p = plan(quant=("none", "fp8dq", "int8wo"), compile=("none", "regional"))
    cells, current, reach = state(p, {("none", "none"): 1.0, ("fp8dq", "none"): 1.6, ("int8wo", "none"): 1.9,
                                      ("none", "regional"): 1.5})
    assert best_moves(p, ("none", "none"), current) == {0: ("fp8dq", 1.6), 1: ("regional", 1.5)}
    (proposal,) = combination_proposals(p, ("none", "none"), current, cells, reach)
    assert proposal.coords == ("fp8dq", "regional") and proposal.kind == "combination" and proposal.rung == 6
    assert "combination of the best moves quant=fp8dq (x1.60 alone), compile=regional (x1.50 alone)" in proposal.reason


def test_a_cache_threshold_is_retuned_under_the_combination() -> None:
    p = plan(quant=("none", "fp8dq"), compile=("none", "regional"), **{"cache.threshold": ("0.05", "0.1", "0.2")})
    cells, current, reach = state(p, {("none", "none", "0.1"): 1.0, ("fp8dq", "none", "0.1"): 1.6,
                                      ("none", "regional", "0.1"): 1.5, ("none", "none", "0.05"): 1.2})
    proposals = combination_proposals(p, ("none", "none", "0.1"), current, cells, reach)
    coords = [x.coords for x in proposals]
    assert ("fp8dq", "regional", "0.1") in coords
    retuned = [x for x in proposals if x.coords[:2] == ("fp8dq", "regional") and x.coords[2] != "0.1"]
    assert {x.coords[2] for x in retuned} == {"0.05", "0.2"}
    assert all("cache.threshold re-tuned" in x.reason for x in retuned)


def test_tried_pairs_give_way_to_larger_sets_then_nothing() -> None:
    p = plan(steps=("28", "16"), quant=("none", "fp8dq"), compile=("none", "regional"))
    measured = {("28", "none", "none"): 1.0, ("16", "none", "none"): 0.6, ("28", "fp8dq", "none"): 1.6,
                ("28", "none", "regional"): 1.5}
    measured.update({("16", "fp8dq", "none"): 1.0, ("16", "none", "regional"): 0.9, ("28", "fp8dq", "regional"): 0.5})
    cells, current, reach = state(p, measured)
    (triple,) = combination_proposals(p, ("28", "none", "none"), current, cells, reach)
    assert triple.coords == ("16", "fp8dq", "regional")
    cells, current, reach = state(p, {**measured, triple.coords: 0.3})
    assert combination_proposals(p, ("28", "none", "none"), current, cells, reach) == []
