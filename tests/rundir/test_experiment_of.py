"""One reading of "which experiment does this run belong to", shared by the laws, the climb and the exports."""

from __future__ import annotations

import pytest

from render.rundir import RunExperiment, experiment_of


@pytest.mark.parametrize("run", [{}, {"config": None}, {"config": {}}, {"config": {"experiment": None}},
                                 {"config": {"experiment": {"name": ""}}}, {"config": {"experiment": "demo"}}])
def test_a_run_outside_any_experiment(run: dict) -> None:
    assert experiment_of(run) is None


def test_a_run_of_an_experiment_and_of_its_final() -> None:
    budget = {"gpu_hours": 1.0, "reserve_gpu_hours": 0.25}
    dev = {"config": {"experiment": {"name": "demo", "budget": budget}}}
    final = {"config": {"experiment": {"name": "demo", "final": True}}}
    assert experiment_of(dev) == RunExperiment("demo", False, budget)
    assert experiment_of(final) == RunExperiment("demo", True, {})
