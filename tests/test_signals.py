"""Signals reach every process of the tool: SIGTERM to the climb's own process, to a launcher's or to a worker's
is passed on to its children and recorded as `cancelled` in the cell it interrupted. Real processes, real
signals: slow (run by `python -m pytest -m slow`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from render import rundir
from tests.rundir.test_processes import start, wait_for_records

pytestmark = pytest.mark.slow
GPUS = ["hydra/launcher=gpus", "hydra.launcher.gpus=[0]", "device=cpu"]


def failures(root: Path) -> dict[str, dict]:
    return {str(p.parent.relative_to(root)): json.loads(p.read_text()) for p in root.rglob("FAILED.json")}


def wait_gone(pid: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while rundir.pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not rundir.pid_alive(pid), f"process {pid} still runs"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_kill_of_the_climb_reaches_its_render_and_the_cell_records_cancelled(tiny_cache: Path, tmp_path: Path,
                                                                              sig: signal.Signals) -> None:
    out_root = tmp_path / "outputs"
    log = (tmp_path / "climb.log").open("w")
    climb = subprocess.Popen([sys.executable, "-m", "assess.cli", "climb", "tiny-demo", "--apply", "--out-root", str(out_root),
                              "--db", str(tmp_path / "index.db")], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
                             env={**os.environ, "PYTHONUNBUFFERED": "1"})
    run_dir = wait_for_records("**/samples.jsonl", out_root, 1, climb, timeout=400)
    render_pid = json.loads((run_dir / "run.json").read_text())["pid"]
    climb.send_signal(sig)  # to the climb's process alone, as `kill <pid>` or a scheduler sends it
    assert climb.wait(timeout=120) == 128 + sig
    wait_gone(render_pid)
    failed = failures(out_root)
    assert failed, "the interrupted cell records its end"
    assert {f["category"] for f in failed.values()} == {"cancelled"}, failed  # not `error` (a broken pipe)
    assert f"received {sig.name}" in failed[str(run_dir.relative_to(out_root))]["message"]
    text = (tmp_path / "climb.log").read_text()
    assert f"cancelled: received {sig.name}; the render command ended with exit {128 + sig}" in text


def test_kill_of_the_gpus_launcher_stops_its_worker_and_the_cell_records_cancelled(tiny_cache: Path, tmp_path: Path) -> None:
    process = start("-m", "steps=5,6", "prompts=dev", "prompts.limit=20", "render_anchor=false", *GPUS, cwd=tmp_path)
    run_dir = wait_for_records("outputs/multirun/*/*/0_*/samples.jsonl", tmp_path, 1, process)
    worker = json.loads((run_dir / "run.json").read_text())["pid"]
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=120) == 128 + signal.SIGTERM
    wait_gone(worker)
    failed = json.loads((run_dir / "FAILED.json").read_text())
    assert failed["category"] == "cancelled" and "received SIGTERM" in failed["message"]
    assert not (run_dir / "DONE.json").exists()
    (other,) = [d for d in run_dir.parent.iterdir() if d.name.startswith("1_")]
    assert json.loads((other / "FAILED.json").read_text())["category"] == "cancelled"  # never started: cancelled too


def test_kill_of_a_worker_records_cancelled_and_the_sweep_ends(tiny_cache: Path, tmp_path: Path) -> None:
    process = start("-m", "steps=5,6", "prompts=dev", "prompts.limit=20", "render_anchor=false", *GPUS, cwd=tmp_path)
    run_dir = wait_for_records("outputs/multirun/*/*/0_*/samples.jsonl", tmp_path, 1, process)
    worker = json.loads((run_dir / "run.json").read_text())["pid"]
    assert worker != process.pid
    os.kill(worker, signal.SIGTERM)
    assert process.wait(timeout=120) == 1  # the sweep ends with its failed (cancelled) cells listed
    failed = json.loads((run_dir / "FAILED.json").read_text())
    assert failed["category"] == "cancelled" and "received SIGTERM" in failed["message"]
    (other,) = [d for d in run_dir.parent.iterdir() if d.name.startswith("1_")]
    assert json.loads((other / "FAILED.json").read_text())["category"] == "cancelled"
