"""`assess status`: done, failed, running, crashed, pending — from the run directories."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from assess.errors import NotARunDirectory
from assess.status import format_plain, status
from render.rundir import slurm_state
from tests.assess.conftest import RunFactory, make_cell

NOW = datetime(2026, 11, 30, 10, 6, 12, tzinfo=timezone.utc)  # two minutes after the runs started
LATER = datetime.now(timezone.utc) + timedelta(days=1)  # a "now" after this process started


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def by_name(rows: list) -> dict:
    return {r.name: r for r in rows}


def test_states_of_a_sweep(outputs: RunFactory) -> None:
    sweep = outputs.sweep(cells=[  # SWEEP.json as hydra_plugins/hypergrid/lifecycle.py writes it
        {"num": n, "overrides": [f"steps={steps}"], "subdir": f"{n}_steps={steps}", "cell_key": "k",
         "describe": "tiny", "expected_samples": 8}
        for n, steps in enumerate((28, 8, 4, 2, 1))
    ])
    outputs.anchor(sweep, "0_steps=28")
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], terminal="failed", category="oom", n_done=3)
    # started after this test process (else its pid reads as reused), two minutes before LATER
    outputs.run(sweep, "2_steps=4", make_cell(steps=4), overrides=["steps=4"], terminal=None, n_done=2, pid=os.getpid(),
                started_at=(LATER - timedelta(minutes=2)).isoformat())
    outputs.run(sweep, "3_steps=2", make_cell(steps=2), overrides=["steps=2"], terminal=None, n_done=1, pid=dead_pid())
    rows = by_name(status(sweep, now=LATER))
    assert rows["anchor"].state == "done" and (rows["anchor"].n_done, rows["anchor"].n_expected) == (8, 8)
    assert rows["anchor"].elapsed_s == 60.0
    failed = rows["steps=8"]
    assert (failed.state, failed.category, failed.n_done, failed.detail) == ("failed", "oom", 3, "oom while rendering")
    running = rows["steps=4"]
    assert running.state == "running" and running.detail == f"pid {os.getpid()}"
    assert running.elapsed_s == 120.0 and running.eta_s == pytest.approx(6 * 120.0 / 2)
    crashed = rows["steps=2"]
    assert crashed.state == "crashed" and crashed.detail.endswith("is gone") and crashed.eta_s is None
    pending = rows["steps=1"]
    assert (pending.state, pending.n_done, pending.n_expected, pending.path) == ("pending", 0, 8, None)


def test_a_reused_pid_is_not_the_run(outputs: RunFactory) -> None:
    sweep = outputs.sweep()
    outputs.run(sweep, "0_x", make_cell(steps=8), terminal=None, n_done=1, pid=os.getpid(),
                started_at="2000-01-01T00:00:00+00:00")  # this process started after the run did
    [row] = status(sweep)
    assert row.state == "crashed"


def test_a_run_on_another_host_is_not_checked(outputs: RunFactory) -> None:
    sweep = outputs.sweep()
    outputs.run(sweep, "0_x", make_cell(steps=8), terminal=None, n_done=1, host="gpu-node-7", pid=4242)
    [row] = status(sweep, now=NOW)
    assert (row.state, row.detail) == ("running", "on host gpu-node-7 (pid 4242, not checked from here)")


def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, squeue: str, sacct: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, out in (("squeue", squeue), ("sacct", sacct)):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\nprintf '%s' '{out}'\n")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize("squeue, sacct, expected", [
    ("RUNNING\n", "", ("running", "slurm job 77 RUNNING")),
    ("", "CANCELLED by 0\n", ("crashed", "slurm job 77 CANCELLED")),
    ("", "", ("crashed", "slurm job 77 is not in squeue or sacct")),
])
def test_slurm_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outputs: RunFactory, squeue: str, sacct: str,
                    expected: tuple) -> None:
    fake_slurm(tmp_path, monkeypatch, squeue, sacct)
    sweep = outputs.sweep()
    outputs.run(sweep, "0_x", make_cell(steps=8), terminal=None, n_done=1, slurm_job_id="77", host="node-1")
    [row] = status(sweep, now=NOW)
    assert (row.state, row.detail) == expected


def test_slurm_without_its_commands_is_unknown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert slurm_state("77") == ("unknown", "slurm job 77: squeue/sacct not available here")


def test_a_sweep_without_runs_is_all_pending(outputs: RunFactory) -> None:
    sweep = outputs.sweep(cells=[{"num": n, "overrides": [f"steps={s}"], "subdir": f"{n}_steps={s}", "cell_key": "k",
                                  "describe": "tiny", "expected_samples": 8} for n, s in enumerate((8, 4))])
    rows = status(sweep)
    assert [(r.name, r.state) for r in rows] == [("steps=8", "pending"), ("steps=4", "pending")]


def test_sweep_json_is_optional_and_matched_by_overrides(outputs: RunFactory) -> None:
    sweep = outputs.sweep(cells=[{"overrides": ["steps=8"]}, {"overrides": ["steps=4"]}])
    outputs.run(sweep, "0_steps=8", make_cell(steps=8), overrides=["steps=8"])
    assert [(r.name, r.state) for r in status(sweep)] == [("steps=8", "done"), ("steps=4", "pending")]
    (sweep / "SWEEP.json").unlink()
    assert [(r.name, r.state) for r in status(sweep)] == [("steps=8", "done")]


def test_status_of_one_run_and_of_nothing(outputs: RunFactory, tmp_path: Path) -> None:
    sweep = outputs.sweep()
    run = outputs.run(sweep, "0_steps=8", make_cell(steps=8), overrides=["steps=8"])
    assert [r.state for r in status(run)] == ["done"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotARunDirectory):
        status(tmp_path / "empty")


def test_plain_format(outputs: RunFactory) -> None:
    sweep = outputs.sweep(cells=[{"overrides": ["steps=8"]}, {"overrides": ["steps=4"]}])
    outputs.run(sweep, "0_steps=8", make_cell(steps=8), overrides=["steps=8"], terminal="failed", category="timeout")
    lines = format_plain(status(sweep)).splitlines()
    assert lines[0].split() == ["cell", "cell", "key", "state", "samples", "elapsed", "eta", "detail"]
    assert lines[1].split()[2:5] == ["failed", "(timeout)", "8/8"]
    assert lines[2].split() == ["steps=4", "k", "pending", "0/8", "-", "-"]
    assert lines[-1] == "2 cell(s): 1 failed, 1 pending; samples 8/16"


def test_durations() -> None:
    from assess.status import format_duration

    assert [format_duration(s) for s in (None, 0.31, 59.6, 61, 3725)] == ["-", "0.3s", "1m00s", "1m01s", "1h02m"]


def test_rich_table(outputs: RunFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from assess.status import print_table

    monkeypatch.setenv("COLUMNS", "200")
    sweep = outputs.sweep(cells=[{"overrides": ["steps=8"]}, {"overrides": ["x=[a]"]}])
    outputs.run(sweep, "0_steps=8", make_cell(steps=8), overrides=["steps=8"], terminal="failed", category="oom")
    print_table(status(sweep))
    out = capsys.readouterr().out
    assert "steps=8" in out and "failed (oom)" in out and "x=[a]" in out and "0_steps=8" not in out
    assert "2 cell(s): 1 failed, 1 pending; samples 8/16" in out
