"""One reading of "which experiment does this run belong to", shared by the laws, the climb and the exports."""

from __future__ import annotations

import pytest

from render.rundir import AnchorRef, PromptsRef, RunExperiment, RunRecord, experiment_of


def record(config: dict | None) -> RunRecord:
    return RunRecord(3, "k", {}, AnchorRef("a"), False, PromptsRef("smoke", ("p0",)), (0,), config=config or {})


@pytest.mark.parametrize("config", [None, {}, {"experiment": None}, {"experiment": {"name": ""}}, {"experiment": "demo"}])
def test_a_run_outside_any_experiment(config: dict | None) -> None:
    assert experiment_of(record(config)) is None


def test_a_run_of_an_experiment_and_of_its_final() -> None:
    budget = {"gpu_hours": 1.0, "reserve_gpu_hours": 0.25}
    dev = record({"experiment": {"name": "demo", "budget": budget}})
    final = record({"experiment": {"name": "demo", "final": True}})
    assert experiment_of(dev) == RunExperiment("demo", False, budget)
    assert experiment_of(final) == RunExperiment("demo", True, {})
