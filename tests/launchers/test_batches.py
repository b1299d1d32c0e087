"""plan_batches: how a sweep's cells are spread over at most one job per GPU."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from hydra_plugins.hypergrid.placement import CellSpec, chunk_batches, plan_batches


def cell(num: int, model: str = "tiny", steps: int = 8, samples: int = 4, gpus: int = 1) -> CellSpec:
    return CellSpec((f"steps={steps}",), num, Path(f"/sweep/{num}"), model, steps, samples, gpus)


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
    from hydra_plugins.hypergrid.placement import slots

    assert slots([0, 1, 2, 3, 4], 2) == [(0, 1), (2, 3)]  # GPU 4 alone cannot hold a width-2 cell
    assert slots([3, 5], 1) == [(3,), (5,)]
    with pytest.raises(ValueError, match="2 GPUs wide and the launcher has 1 \\(0\\); valid widths are 1 to 1"):
        slots([0], 2)


def test_a_cell_spec_knows_its_parallel_width(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    from hydra_plugins.hypergrid.placement import cell_spec

    def spec(parallel: dict | None) -> CellSpec:
        config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path), "subdir": "0"}, "job": {"num": 0}},
                                   "steps": 4, **({"parallel": parallel} if parallel else {})})
        return cell_spec(["steps=4"], config)

    assert spec(None).gpus == 1 and spec({"name": "none"}).gpus == 1
    assert spec({"name": "usp", "ulysses_degree": 2, "ring_degree": 2, "tp_degree": 1}).gpus == 4


def test_cells_of_each_width_run_side_by_side_in_slots_of_their_width() -> None:
    """Before, every slot was as wide as the widest cell: on 3 GPUs a width-1 and a width-2 cell shared one slot of
    (0, 1) one after the other, and GPU 2 stayed idle."""
    from hydra_plugins.hypergrid.placement import allot, place

    one, two = cell(0), cell(1, gpus=2)
    assert allot([one, two], 3) == {2: 1, 1: 1}
    assert place([one, two], [0, 1, 2]) == [((0, 1), [two]), ((2,), [one])]
    # GPUs left over go where the most work per slot waits, a slot at a time, never to a width with no cell for it
    ones = [cell(i) for i in range(6)]
    assert allot([*ones, cell(6, gpus=2)], 8) == {2: 1, 1: 6}
    assert allot([*ones, cell(6, gpus=2, steps=80), cell(7, gpus=2, steps=80)], 8) == {2: 2, 1: 4}
    jobs = place([*ones, cell(6, gpus=2)], list(range(8)))
    used = [g for gpus, _ in jobs for g in gpus]
    assert len(used) == len(set(used)) == 8 and sorted(len(b) for _, b in jobs) == [1, 1, 1, 1, 1, 1, 1]
    # widths that do not fit beside each other: slots as wide as the widest cell, the rest of a slot idle
    assert allot([one, two], 2) is None
    assert place([one, two], [0, 1]) == [((0, 1), [one, two])]


def test_slurm_shares_the_gpu_cap_between_widths_or_runs_them_in_waves() -> None:
    """`gpus` caps GPUs at once. Before, every job of a sweep with a width-2 cell asked for 2 GPUs, and up to `gpus`
    of them ran at once: twice the cap."""
    from hydra_plugins.hypergrid.slurm import waves

    ones, two = [cell(i) for i in range(4)], cell(4, gpus=2)
    assert waves([*ones, two], 4) == [{2: 1, 1: 2}]  # side by side: 2 + 2 x 1 GPUs
    assert waves([*ones, two], 2) == [{2: 1}, {1: 2}]  # one after the other, each with the whole cap
    assert waves(ones, 3) == [{1: 3}]
    for cap in (2, 3, 4, 8):
        for wave in waves([*ones, two, cell(5, gpus=2)], cap):
            assert sum(width * running for width, running in wave.items()) <= cap


def test_a_cell_wider_than_the_slurm_cap_is_refused_before_anything_is_written(capsys: pytest.CaptureFixture[str]
                                                                                ) -> None:
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    from hydra_plugins.hypergrid.lifecycle import preflight_widths

    config = OmegaConf.create({"hydra": {"launcher": {"_target_": "hydra_plugins.hypergrid.slurm.SlurmLauncher",
                                                      "gpus": 1}}})
    wide = SimpleNamespace(gpus=2, cell=SimpleNamespace(describe=lambda: "tiny parallel=ulyssesx2"))
    with pytest.raises(SystemExit) as exit_:
        preflight_widths(config, [wide])
    assert exit_.value.code == 2
    assert ("cell tiny parallel=ulyssesx2 is 2 GPUs wide and hydra/launcher=slurm runs at most 1 at once; valid "
            "widths here are 1 to 1") in capsys.readouterr().err
