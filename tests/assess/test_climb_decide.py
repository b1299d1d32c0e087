"""The climb's decision logic on synthetic per-cell tables with known answers (pure functions, no index)."""

from __future__ import annotations

import math
import statistics

import pytest
from scipy import stats

from render.laws.gpu_budget import Budget
from assess.climb.decide import (
    BudgetState,
    CellData,
    Plan,
    decide,
    group_commands,
    neighbours,
    reached,
)
from assess.statistics.compare import holm, mean_interval, tost

IDS = tuple(f"dev-{i:03d}" for i in range(16))
PLAN = Plan(axes={"steps": ("2", "4", "8", "16"), "cache": ("none", "fbcache", "taylorseer")}, start=("8", "none"),
            rungs=(4, 8, 16), eta=2, band=0.05, alpha=0.05, higher_is_better=True, dev_ids=IDS, n_seeds=1,
            default_steps=8, anchor_steps=16)
ROOMY = BudgetState(Budget(gpu_hours=10_000.0 / 3600, reserve_gpu_hours=1_000.0 / 3600), spent_s=0.0)


def table(coords: tuple[str, ...], rung: int, delta: float, latency: float, spread: float = 0.002,
          unscored: tuple[str, ...] = (), unavailable: tuple[str, ...] = (), **kwargs) -> CellData:
    """A cell rendered on the first `rung` prompts: deltas alternate delta +- spread (mean exactly delta)."""
    ids = IDS[:rung]
    deltas = {p: delta + (spread if i % 2 else -spread) for i, p in enumerate(ids)
              if p not in unscored and p not in unavailable}
    latencies = {p: [latency] for p in ids}
    return CellData(coords, f"key-{'-'.join(coords)}", frozenset(ids), deltas, latencies, frozenset(unscored),
                    {p: "anchor sample missing" for p in unavailable}, **kwargs)


def cells(*tables: CellData) -> dict[tuple[str, ...], CellData]:
    return {t.coords: t for t in tables}


# -- statistics -----------------------------------------------------------------------------


def test_holm_matches_the_step_down_by_hand() -> None:
    assert holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": None}) == pytest.approx(
        {"a": 0.03, "c": 0.06, "b": 0.06, "d": None})
    assert holm({"a": 0.5, "b": 0.6}) == {"a": 1.0, "b": 1.0}


@pytest.mark.parametrize("mean", [-0.06, -0.04, -0.01, 0.0, 0.03, 0.049, 0.07])
@pytest.mark.parametrize("spread", [0.005, 0.02, 0.05])
def test_tost_agrees_with_the_ninety_percent_interval_inside_the_band(mean: float, spread: float) -> None:
    values = [mean + (spread if i % 2 else -spread) * (1 + i / 10) for i in range(10)]
    p_equivalent, _ = tost(values, band=0.05)
    m, se = statistics.fmean(values), statistics.stdev(values) / math.sqrt(len(values))
    low, high = stats.t.interval(0.90, len(values) - 1, loc=m, scale=se)
    assert (p_equivalent < 0.05) == (-0.05 < low and high < 0.05)


def test_tost_of_identical_deltas_decides_by_value() -> None:
    assert tost([0.0] * 5, 0.05) == (0.0, 1.0)  # the anchor against itself: at parity
    assert tost([-0.1] * 5, 0.05) == (1.0, 0.0)
    assert tost([0.01], 0.05) == (None, None)  # one prompt: no test


def test_bootstrap_interval_is_seeded_and_brackets_the_mean() -> None:
    values = [0.1, -0.2, 0.05, 0.3, -0.1, 0.0, 0.2]
    first = mean_interval(values)
    assert first.low < statistics.fmean(values) < first.high
    assert mean_interval(values) == first
    assert (mean_interval([0.5]).low, mean_interval([0.5]).high) == (None, None)
    assert (mean_interval([0.5, 0.5]).low, mean_interval([0.5, 0.5]).high) == (0.5, 0.5)


# -- the first generation -------------------------------------------------------------------


def test_the_first_generation_is_the_start_cell_and_its_one_factor_neighbours() -> None:
    d = decide(PLAN, {}, [], ROOMY)
    assert d.generation == 1 and d.incumbent == ("8", "none") and d.incumbent_status == "start"
    assert [(p.coords, p.rung, p.kind) for p in d.proposals] == [
        (("8", "none"), 4, "start"),
        (("4", "none"), 4, "neighbour"), (("16", "none"), 4, "neighbour"),  # adjacent values of a numeric axis
        (("8", "fbcache"), 4, "neighbour"), (("8", "taylorseer"), 4, "neighbour"),  # every other category
    ]
    assert d.stop is None
    assert group_commands(PLAN, d.proposals) == [
        (4, {"steps": ["4", "8", "16"], "cache": ["none"]}),
        (4, {"steps": ["8"], "cache": ["fbcache", "taylorseer"]}),
    ]


def test_neighbours_at_the_edge_of_an_ordered_axis() -> None:
    assert [c for _, c in neighbours(PLAN, ("2", "fbcache"))] == [("4", "fbcache"), ("2", "none"), ("2", "taylorseer")]


# -- parity and the incumbent ---------------------------------------------------------------


def generation_one() -> dict[tuple[str, ...], CellData]:
    return cells(
        table(("8", "none"), 4, -0.01, 0.80),
        table(("4", "none"), 4, -0.02, 0.40),
        table(("16", "none"), 4, 0.0, 1.60, spread=0.0, is_anchor=True),  # the anchor's own cell
        table(("8", "fbcache"), 4, -0.30, 0.30),  # fast but far out of the band
        table(("8", "taylorseer"), 4, -0.03, 0.50),
    )


def test_verdicts_parity_out_and_the_incumbent() -> None:
    d = decide(PLAN, generation_one(), [], ROOMY)
    verdicts = {c: e.verdict for c, e in d.current.items()}
    assert verdicts == {("8", "none"): "parity", ("4", "none"): "parity", ("16", "none"): "parity",
                        ("8", "fbcache"): "out", ("8", "taylorseer"): "parity"}
    assert d.incumbent == ("4", "none") and d.incumbent_status == "parity"  # the fastest at parity, not the fastest
    assert ("8", "fbcache") not in d.frontier  # out of band: not on the navigation frontier
    assert d.frontier == [("4", "none"), ("8", "none"), ("16", "none")]  # taylorseer: slower and worse than 4 steps


def test_holm_is_applied_to_the_wilcoxon_tests_across_the_cells_of_a_rung() -> None:
    d = decide(PLAN, generation_one(), [], ROOMY)
    rung = d.evaluations[4]
    raw = {c: e.wilcoxon_p for c, e in rung.items() if e.wilcoxon_p is not None}
    assert len(raw) == 4  # the anchor's own cell has all differences 0: no test
    assert {c: rung[c].wilcoxon_holm for c in raw} == pytest.approx(holm(raw))
    assert all(e.verdict != "parity" or e.tost_p < PLAN.alpha for e in rung.values())


def test_undecided_when_the_interval_straddles_the_band_edge() -> None:
    d = decide(PLAN, cells(table(("4", "none"), 4, -0.045, 0.4, spread=0.03)), [], ROOMY)
    e = d.current[("4", "none")]
    assert e.verdict == "undecided" and d.incumbent_status == "provisional" and d.incumbent == ("4", "none")


def test_ties_in_latency_go_to_the_better_quality_then_to_grid_order() -> None:
    tied = cells(table(("4", "none"), 4, -0.02, 0.5), table(("8", "none"), 4, -0.01, 0.5),
                 table(("8", "fbcache"), 4, -0.01, 0.5))
    d = decide(PLAN, tied, [], ROOMY)
    assert d.incumbent == ("8", "none")  # better quality than 4 steps; same as fbcache, earlier in the grid


def test_confirmed_only_at_the_top_rung() -> None:
    top = cells(table(("4", "none"), 16, -0.01, 0.4))
    assert decide(PLAN, top, [], ROOMY).incumbent_status == "confirmed"
    assert decide(PLAN, cells(table(("4", "none"), 8, -0.01, 0.4)), [], ROOMY).incumbent_status == "parity"


def test_undecided_at_the_top_rung_is_not_a_candidate() -> None:
    d = decide(PLAN, cells(table(("4", "none"), 16, -0.045, 0.4, spread=0.05), table(("8", "none"), 4, -0.01, 0.9,
                                                                                      spread=0.04)), [], ROOMY)
    assert d.current[("4", "none")].verdict == "undecided"
    assert d.incumbent == ("8", "none") and d.incumbent_status == "provisional"


# -- missing scores -------------------------------------------------------------------------


def test_unscored_prompts_keep_a_cell_at_the_rung_it_has_scores_for() -> None:
    cell = table(("4", "none"), 8, -0.01, 0.4, unscored=("dev-006",))
    assert reached(PLAN, cell) == 8
    d = decide(PLAN, cells(cell), [], ROOMY)
    assert d.current[("4", "none")].rung == 4
    assert not [p for p in d.proposals if p.coords == ("4", "none") and p.rung == 8]  # rendered: never re-proposed


def test_unavailable_scores_leave_the_rest_evaluated_and_listed() -> None:
    d = decide(PLAN, cells(table(("4", "none"), 4, -0.01, 0.4, unavailable=("dev-001",))), [], ROOMY)
    e = d.current[("4", "none")]
    assert (e.n, e.missing, e.verdict) == (3, ("dev-001",), "parity")


def test_a_cell_without_any_quality_is_no_candidate() -> None:
    none_scored = table(("4", "none"), 4, 0.0, 0.1, unavailable=IDS[:4])
    d = decide(PLAN, cells(none_scored, table(("8", "none"), 4, -0.01, 0.8)), [], ROOMY)
    assert d.current[("4", "none")].verdict == "no-data"
    assert d.incumbent == ("8", "none")
    assert not [p for p in d.proposals if p.coords == ("4", "none")]


def test_a_cell_without_warm_latency_ranks_last() -> None:
    cold = CellData(("4", "none"), "k", frozenset(IDS[:4]), {p: -0.01 + 0.001 * i for i, p in enumerate(IDS[:4])}, {})
    d = decide(PLAN, cells(cold, table(("8", "none"), 4, -0.01, 0.8)), [], ROOMY)
    assert d.current[("4", "none")].latency is None and d.incumbent == ("8", "none")


# -- promotion ------------------------------------------------------------------------------


def test_the_best_half_of_a_rung_moves_up_plausible_first_then_by_latency() -> None:
    d = decide(PLAN, generation_one(), [], ROOMY)
    promoted = [(p.coords, p.rung, p.kind) for p in d.proposals if p.kind in ("promotion", "incumbent")]
    # 4 candidates at rung 4 (the anchor's cell is none), eta 2: the best ceil(4/2) = 2 plausible by latency;
    # fbcache is the fastest but out of band
    assert promoted == [(("4", "none"), 8, "incumbent"), (("8", "taylorseer"), 8, "promotion")]
    assert "rank 2 of 4 at rung 4 (top 2)" in d.proposals[1].reason


def test_a_cell_already_at_the_next_rung_is_not_promoted_again() -> None:
    data = generation_one()
    data[("8", "taylorseer")] = table(("8", "taylorseer"), 8, -0.03, 0.50)
    d = decide(PLAN, data, [], ROOMY)
    assert (("8", "taylorseer"), 8) not in [(p.coords, p.rung) for p in d.proposals]
    assert (("8", "taylorseer"), 16) in [(p.coords, p.rung) for p in d.proposals]  # best of the 1 cell at rung 8


def test_a_failed_cell_is_not_proposed_again_but_a_cancelled_one_is() -> None:
    base = {c: t for c, t in generation_one().items() if c != ("16", "none")}
    oom = CellData(("16", "none"), None, frozenset(), failed="oom: out of memory", blocked_from=4)
    assert ("16", "none") not in [p.coords for p in decide(PLAN, {**base, oom.coords: oom}, [], ROOMY).proposals]
    cancelled = CellData(("16", "none"), None, frozenset(), failed="cancelled: SIGTERM", blocked_from=None)
    d = decide(PLAN, {**base, ("8", "none"): base[("8", "none")], cancelled.coords: cancelled}, [], ROOMY)
    assert d.incumbent == ("4", "none")
    # 16 steps is no neighbour of 4 steps: proposed only around its own incumbent; check the rule directly
    d8 = decide(PLAN, {cancelled.coords: cancelled}, [], ROOMY)
    assert (("16", "none"), 4) in [(p.coords, p.rung) for p in d8.proposals]


def test_once_parity_is_confirmed_at_the_top_slower_cells_are_not_promoted() -> None:
    data = cells(table(("4", "none"), 16, -0.01, 0.4), table(("8", "none"), 4, -0.01, 0.8),
                 table(("2", "none"), 4, -0.3, 0.2), table(("4", "fbcache"), 4, -0.01, 0.3, spread=0.08),
                 table(("4", "taylorseer"), 4, -0.5, 0.2))
    d = decide(PLAN, data, [], ROOMY)
    assert d.incumbent == ("4", "none") and d.incumbent_status == "confirmed"
    assert d.current[("4", "fbcache")].verdict == "undecided"
    promoted = [(p.coords, p.rung) for p in d.proposals if p.kind == "promotion"]
    assert promoted == [(("4", "fbcache"), 8)]  # faster; 8 steps is slower


def test_when_the_incumbents_moves_are_all_tried_the_sweep_goes_around_the_next_fastest_candidate() -> None:
    data = cells(table(("4", "none"), 16, -0.01, 0.4), table(("8", "none"), 4, -0.01, 0.8),
                 table(("2", "none"), 4, -0.3, 0.2), table(("4", "fbcache"), 4, -0.01, 0.3, spread=0.08),
                 table(("4", "taylorseer"), 4, -0.5, 0.2))
    d = decide(PLAN, data, [], ROOMY)
    moves = [(p.coords, p.reason) for p in d.proposals if p.kind == "neighbour"]
    assert [c for c, _ in moves] == [("2", "fbcache"), ("8", "fbcache")]  # around 4 steps + fbcache, the next fastest
    assert moves[0][1] == ("one-factor move on steps around steps=4 cache=fbcache (the incumbent's moves are all "
                           "tried)")


# -- pruning --------------------------------------------------------------------------------


def test_a_family_off_the_frontier_two_generations_running_is_pruned_and_never_proposed() -> None:
    data = generation_one()
    first = decide(PLAN, data, [], ROOMY)
    assert ("cache", "fbcache") in first.flat and not first.pruned
    record = {"frontier": [list(c) for c in first.frontier], "flat": [list(f) for f in first.flat], "pruned": []}
    second = decide(PLAN, data, [record], ROOMY)
    assert ("cache", "fbcache") in second.newly_pruned and ("cache", "fbcache") in second.pruned
    assert ("steps", "4") not in second.pruned  # the incumbent's own value
    assert not [p for p in second.proposals if p.coords[1] == "fbcache"]  # 4 steps + fbcache is not proposed


def test_the_incumbent_unprunes_its_own_family() -> None:
    record = {"frontier": [], "flat": [["cache", "taylorseer"]], "pruned": [["cache", "taylorseer"]]}
    d = decide(PLAN, cells(table(("4", "taylorseer"), 4, -0.01, 0.2), table(("8", "none"), 4, -0.01, 0.8)),
               [record], ROOMY)
    assert d.incumbent == ("4", "taylorseer") and ("cache", "taylorseer") not in d.pruned


# -- stopping -------------------------------------------------------------------------------


def test_stop_when_the_budget_is_down_to_the_reserve() -> None:
    at_reserve = BudgetState(Budget(gpu_hours=10_000.0 / 3600, reserve_gpu_hours=1_000.0 / 3600), spent_s=9_000.0)
    d = decide(PLAN, generation_one(), [], at_reserve)
    assert d.stop and d.stop.startswith("budget:") and "reserve" in d.stop and not d.proposals


def test_proposals_that_do_not_fit_are_dropped_in_priority_order() -> None:
    tight = BudgetState(Budget(gpu_hours=20.0 / 3600, reserve_gpu_hours=5.0 / 3600), spent_s=0.0)  # 15 s left
    half_a_second = lambda cell, steps, n: 0.5 * n  # noqa: E731
    d = decide(PLAN, generation_one(), [], tight, estimate=half_a_second, anchor_rendered=frozenset(IDS[:8]))
    # each promotion to rung 8 renders 4 new prompts (2 s); each new cell at rung 4 renders 4 (2 s)
    assert (d.est_s, len(d.proposals), d.dropped) == (10.0, 5, [])  # 2 promotions, 3 new neighbours of 4 steps
    tighter = BudgetState(Budget(gpu_hours=10.0 / 3600, reserve_gpu_hours=5.0 / 3600), spent_s=0.0)
    d = decide(PLAN, generation_one(), [], tighter, estimate=half_a_second, anchor_rendered=frozenset(IDS))
    assert [p.kind for p in d.proposals] == ["incumbent", "promotion"]
    assert all("does not fit" in why for _, why in d.dropped)


def test_stop_after_two_generations_without_a_frontier_move() -> None:
    data = generation_one()
    front = [list(c) for c in decide(PLAN, data, [], ROOMY).frontier]
    history = [{"frontier": front, "flat": [], "pruned": []}] * 2
    assert decide(PLAN, data, history, ROOMY).stop == "the frontier did not move over the last two generations"
    moved = [{"frontier": front[:1], "flat": [], "pruned": []}, {"frontier": front, "flat": [], "pruned": []}]
    assert decide(PLAN, data, moved, ROOMY).stop is None


def test_stop_when_parity_is_confirmed_at_the_top_and_nothing_faster_is_left() -> None:
    data = cells(table(("4", "none"), 16, -0.01, 0.4), table(("2", "none"), 4, -0.3, 0.2),
                 table(("8", "none"), 4, -0.2, 0.8), table(("4", "fbcache"), 4, -0.2, 0.3),
                 table(("4", "taylorseer"), 4, -0.5, 0.2))  # every other cell out of band: no other centre
    d = decide(PLAN, data, [], ROOMY)
    assert d.stop == "parity confirmed at the top rung, nothing faster left to try"
    assert d.incumbent == ("4", "none") and not d.proposals


def test_stop_when_nothing_is_at_parity_and_nothing_is_left() -> None:
    data = {c: table(c, 4, -0.5, 0.5) for c in [("8", "none"), ("4", "none"), ("16", "none"), ("8", "fbcache"),
                                                  ("8", "taylorseer")]}
    d = decide(PLAN, data, [], ROOMY)
    assert d.incumbent_status == "start" and d.stop == "nothing left to propose, and no cell is at parity"


def test_a_recorded_cell_is_never_proposed_at_a_rung_it_has() -> None:
    d = decide(PLAN, generation_one(), [], ROOMY)
    data = generation_one()
    for p in d.proposals:
        assert reached(PLAN, data[p.coords]) < p.rung if p.coords in data else p.rung == PLAN.rungs[0]


# decide.py's promises pinned by mutation testing (docs/testing.md)


def test_a_cell_that_did_the_same_work_as_an_evaluated_one_is_never_crowned_on_its_speed_and_is_said_so() -> None:
    data = generation_one()  # ("4", "none") is the fastest at parity ...
    data[("4", "none")] = CellData(**{**vars(data[("4", "none")]), "same_work_as": ("8", "none")})
    d = decide(PLAN, data, [], ROOMY)
    assert d.incumbent == ("8", "taylorseer")  # ... but its images are ("8", "none")'s: its speed is noise
    assert "same work: steps=4 cache=none renders byte-identical images to steps=8 cache=none: one result, never " \
           "ranked apart on speed" in d.reasons


def test_a_cache_that_never_engaged_is_said_once_as_idle_not_again_as_the_same_work() -> None:
    data = generation_one()
    data[("8", "fbcache")] = CellData(**{**vars(data[("8", "fbcache")]), "same_work_as": ("8", "none"),
                                         "idle_cache": "0 of 4 steps reused"})
    reasons = decide(PLAN, data, [], ROOMY).reasons
    assert [r for r in reasons if "steps=8 cache=fbcache" in r] == [
        "cache never engaged: steps=8 cache=fbcache (0 of 4 steps reused): not promoted, and no cell with its cache at "
        "as many or fewer steps and as high or a lower threshold is proposed"]


def test_a_cell_that_failed_for_good_at_the_next_rung_is_not_promoted_and_the_next_ranked_cell_still_is() -> None:
    data = generation_one()
    data[("4", "none")] = CellData(**{**vars(data[("4", "none")]), "blocked_from": 8})  # the incumbent failed at 8
    d = decide(PLAN, data, [], ROOMY)
    assert d.incumbent == ("4", "none")
    at_8 = {p.coords: p.kind for p in d.proposals if p.rung == 8}
    assert ("4", "none") not in at_8  # neither as the incumbent climbing to confirm nor as a promotion
    assert at_8[("8", "taylorseer")] == "promotion"  # second of the top two at rung 4: promoted all the same


def test_the_design_note_names_the_axes_the_sweep_moves_and_counts_its_cells() -> None:
    d = decide(PLAN, generation_one(), [], ROOMY)
    neighbours = [p for p in d.proposals if p.kind == "neighbour"]
    axes = sorted({p.axis for p in neighbours if p.axis})
    assert neighbours and axes
    assert f"sweep {'/'.join(axes)} ({len(neighbours)} cells)" in d.note.split("; ")


def test_the_finals_cost_is_the_incumbent_the_steps_only_control_and_the_anchor_on_the_holdout_or_unknown() -> None:
    from dataclasses import replace

    from assess.climb.decide import CONTROL, final_cost

    plan = replace(PLAN, holdout_n=10)
    per_image = {("4", "none"): 1.0, CONTROL: 2.0, None: 4.0}
    calls: list[tuple[object, int, int]] = []

    def estimate(coords: tuple[str, ...] | None, steps: int, n: int) -> float | None:
        calls.append((coords, steps, n))
        return per_image.get(coords) * n if coords in per_image else None  # type: ignore[operator]

    assert final_cost(plan, ("4", "none"), estimate) == 10 * (1.0 + 2.0 + 4.0)
    assert calls == [(("4", "none"), 4, 10), (CONTROL, 4, 10), (None, 16, 10)]
    assert final_cost(plan, ("8", "none"), estimate) is None  # the incumbent's cost unknown: the final's too
    assert final_cost(PLAN, ("4", "none"), estimate) is None  # no holdout
    assert final_cost(plan, ("4", "none"), None) is None


def test_a_final_that_does_not_fit_names_the_budget_an_amendment_must_give_it() -> None:
    from dataclasses import replace

    from assess.climb.decide import final_fits
    from render.laws.gpu_budget import FINAL_MARGIN

    spent = BudgetState(Budget(gpu_hours=1.0, reserve_gpu_hours=0.0), spent_s=3000.0)
    assert final_fits(spent) == ""  # no estimate of the final
    assert final_fits(replace(spent, final_s=360.0)) == \
        "; the final fits (an estimated 0.1 of the 0.1667 GPU-h left)"
    needed = math.ceil((3000.0 + 1200.0 * FINAL_MARGIN) / 3600 * 1000) / 1000
    assert final_fits(replace(spent, final_s=1200.0)) == (
        "; the final does not fit (an estimated 0.3333 GPU-h, 0.1667 left): raise experiment.budget.gpu_hours to "
        f"{needed:g} by a recorded amendment (assess climb <name> --set experiment.budget.gpu_hours=... --amend \"<why>\")")
