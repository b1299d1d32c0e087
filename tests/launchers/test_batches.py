"""plan_batches: how a sweep's cells are spread over at most one job per GPU."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from hydra_plugins.hypergrid.batches import CellSpec, chunk_batches, plan_batches


def cell(num: int, model: str = "tiny", steps: int = 8, samples: int = 4) -> CellSpec:
    return CellSpec((f"steps={steps}",), num, Path(f"/sweep/{num}"), model, steps, samples)


def loads(batches: list[list[CellSpec]]) -> list[int]:
    return [sum(c.cost for c in b) for b in batches]


def test_every_cell_runs_once_in_at_most_n_jobs() -> None:
    cells = [cell(i, steps=s) for i, s in enumerate([2, 4, 8, 16, 32, 4, 8])]
    batches = plan_batches(cells, 3)
    assert len(batches) == 3 and all(batches)
    assert Counter(c.num for b in batches for c in b) == Counter(range(7))


@pytest.mark.parametrize("n_jobs", [0, 1])
def test_one_job_takes_every_cell_in_order(n_jobs: int) -> None:
    cells = [cell(i, model=m) for i, m in enumerate(["b", "a", "b", "a"])]
    (batch,) = plan_batches(cells, n_jobs)
    assert [(c.model, c.num) for c in batch] == [("a", 1), ("a", 3), ("b", 0), ("b", 2)]


def test_more_gpus_than_cells_gives_one_cell_per_job() -> None:
    batches = plan_batches([cell(0), cell(1)], 8)
    assert sorted(len(b) for b in batches) == [1, 1]


def test_equal_cells_are_spread_evenly() -> None:
    batches = plan_batches([cell(i) for i in range(6)], 3)
    assert loads(batches) == [64, 64, 64]


def test_cells_of_one_model_stay_together_when_that_keeps_the_balance() -> None:
    cells = [cell(i, model="flux" if i % 2 else "sdxl") for i in range(6)]
    batches = plan_batches(cells, 2)
    assert sorted({c.model for c in b}.pop() for b in batches) == ["flux", "sdxl"]
    assert all(len({c.model for c in b}) == 1 for b in batches), "a job would load two models"


def test_balance_wins_over_grouping_when_one_model_is_most_of_the_work() -> None:
    cells = [cell(i, model="flux", steps=32) for i in range(4)] + [cell(4, model="sdxl", steps=2)]
    batches = plan_batches(cells, 2)
    assert sorted(loads(batches)) == [256, 256 + 8], "the heavy model's cells are split over both jobs"


def test_the_costliest_cell_goes_first_to_the_lightest_job() -> None:
    cells = [cell(0, steps=100)] + [cell(i, steps=10) for i in range(1, 11)]
    batches = plan_batches(cells, 2)
    heavy = next(b for b in batches if any(c.num == 0 for c in b))
    assert [c.num for c in heavy] == [0], "the big cell shares its job with nothing it could not balance"
    assert sorted(loads(batches)) == [400, 400]


def test_chunks_keep_the_order_and_the_size_limit() -> None:
    batches = plan_batches([cell(i) for i in range(5)], 1)
    assert [[c.num for c in b] for b in chunk_batches(batches, 2)] == [[0, 1], [2, 3], [4]]
    assert chunk_batches(batches, None) == batches


def test_slots_are_disjoint_and_as_wide_as_the_widest_cell() -> None:
    from hydra_plugins.hypergrid.batches import slots

    assert slots([0, 1, 2, 3, 4], 2) == [(0, 1), (2, 3)]  # GPU 4 alone cannot hold a width-2 cell
    assert slots([3, 5], 1) == [(3,), (5,)]
    with pytest.raises(ValueError, match="2 GPUs wide and the launcher has 1 \\(0\\); valid widths are 1 to 1"):
        slots([0], 2)


def test_a_cell_spec_knows_its_parallel_width(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    from hydra_plugins.hypergrid.batches import cell_spec

    def spec(parallel: dict | None) -> CellSpec:
        config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path), "subdir": "0"}, "job": {"num": 0}},
                                   "steps": 4, **({"parallel": parallel} if parallel else {})})
        return cell_spec(["steps=4"], config)

    assert spec(None).gpus == 1 and spec({"name": "none"}).gpus == 1
    assert spec({"name": "usp", "ulysses_degree": 2, "ring_degree": 2, "tp_degree": 1}).gpus == 4
