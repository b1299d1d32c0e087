"""benchmarks/climb.py's comparison with Optuna runs, within its budget, on the same samples as the climb."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import load_benchmark

pytest.importorskip("optuna")


def bench() -> Any:
    return load_benchmark("climb")


@pytest.mark.parametrize("method", ["TPE", "TPE + WilcoxonPruner", "NSGA-II"])
def test_each_optuna_search_spends_its_budget_and_answers_a_feasible_cell(method: str) -> None:
    b = bench()
    exhaustive = sum(b.true_cell(c)[0] for c in b.grid()) * b.DEV
    budget = 0.05 * exhaustive
    world = b.World(0, 0.01, jitter=0.3)
    answer, spent = b.optuna_search(method, world, budget, 0)
    assert 0.8 * budget < spent <= budget  # stops at the budget, not far below it
    assert spent == pytest.approx(sum(float(world.draw(c)[1][:n].sum()) for c, n in world.rendered.items()))
    if answer is not None:  # what it answers was rendered on every dev prompt and is in band as observed
        assert world.rendered[answer] == b.DEV and abs(world.draw(answer)[0].mean()) <= b.BAND


def test_the_climb_and_optuna_see_the_same_samples_of_a_cell() -> None:
    b = bench()
    first, second = b.World(3, 0.01), b.World(3, 0.01)
    second.draw(("4", "none", "default"))  # another order of first draws
    cell = ("12", "fbcache", "dpmpp-2m")
    assert (first.draw(cell)[0] == second.draw(cell)[0]).all() and (first.draw(cell)[1] == second.draw(cell)[1]).all()
