"""A job whose worker the kernel's out-of-memory killer ended (SIGKILL: no word from the worker itself) is
recorded as `oom`, as CUDA's out-of-memory error is, when the memory cgroup's oom_kill count rose meanwhile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from submitit.core.utils import UncompletedJobError

from hydra_plugins.hypergrid import oom
from hydra_plugins.hypergrid.placement import CellSpec
from hydra_plugins.hypergrid.worker import collect


class VanishedJob:
    """A local submitit job whose worker died by SIGKILL: no result, and the controller ended normally."""

    job_id, state = "42", "FINISHED"

    def result(self):
        raise UncompletedJobError("Job 42 (task: 0) with path /x/42_0_result.pkl\nhas not produced any output (state: FINISHED)")

    def stderr(self) -> str:
        return "8c6e9807 samples:   5%|5         | 1/20"


@pytest.mark.parametrize("kills_after,category", [(4, "oom"), (3, "error")])
def test_a_worker_killed_while_the_oom_count_rose_is_oom(kills_after: int, category: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    events = tmp_path / "memory.events"
    monkeypatch.setattr(oom, "EVENT_FILES", (tmp_path / "absent", events))
    events.write_text("low 0\nhigh 0\nmax 0\noom 3\noom_kill 3\n")
    before = oom.oom_kills()
    events.write_text(f"low 0\nhigh 0\nmax 0\noom {kills_after}\noom_kill {kills_after}\n")  # while the job ran
    cell = CellSpec(("steps=5",), 0, tmp_path / "sweep" / "0_steps=5", "tiny", 5, 20)
    (ret,) = collect([(VanishedJob(), [cell])], before)
    failed = json.loads((cell.run_dir / "FAILED.json").read_text())
    assert failed["category"] == category and failed["job_failed"]
    if category == "oom":
        assert failed["message"].endswith("(the kernel's out-of-memory killer ended 1 process(es) meanwhile "
                                          "(cgroup oom_kill 3 -> 4))")
    assert ret.return_value[0]["category"] == category
