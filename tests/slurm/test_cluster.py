"""Checks of the single-node SLURM cluster started by ``.ci/slurm/up.sh``.

These exercise the exact submitit paths the hydra-submitit-launcher relies on:
GRES GPU arrays with a parallelism cap, cancellation seen through sacct, and
checkpoint + requeue on time-out.

Run:  bash .ci/slurm/up.sh && python -m pytest tests/slurm -m slurm -q
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

import cloudpickle
import submitit

# Jobs unpickle the functions below in a fresh interpreter that cannot import
# this test module by name (pytest puts tests/slurm on sys.path, the job does
# not), so ship them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.slurm  # tests/conftest.py fails (never skips) these when the cluster is not up

PARTITION = "debug"


def _run(*cmd: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module", autouse=True)
def cluster() -> None:
    """Fail, never skip, when the cluster is not fully up: `pytest -m slurm` must not pass without one."""
    try:
        ping = _run("scontrol", "ping")
        if ping.returncode != 0 or "UP" not in ping.stdout:
            first = next((ln.strip() for ln in (ping.stdout + ping.stderr).splitlines() if ln.strip(" *")), "")
            pytest.fail(f"SLURM cluster not up (scontrol ping: {first!r}): run .ci/slurm/up.sh")
        nodes = _run("sinfo", "-h", "-p", PARTITION, "-o", "%T")
        states = nodes.stdout.split()
        if nodes.returncode != 0 or not any(s.rstrip("*") in ("idle", "mixed", "allocated") for s in states):
            pytest.fail(f"no usable node in partition {PARTITION!r} (sinfo: {states or nodes.stderr.strip()})")
        acct = _run("sacct", "-n", "-X", "-S", "now-1hours", "-o", "jobid")
        if acct.returncode != 0:
            pytest.fail(f"sacct does not work (no slurmdbd accounting?): {acct.stderr.strip()}")
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"SLURM cluster not responding: {exc}")


@pytest.fixture
def executor_factory(tmp_path: Path):
    """Builds slurm AutoExecutors under tmp_path; cancels leftover jobs at teardown."""
    jobs: list[Any] = []

    def make(**params: Any) -> "submitit.AutoExecutor":
        ex = submitit.AutoExecutor(folder=tmp_path / "submitit" / "%j", cluster="slurm")
        ex.update_parameters(slurm_partition=PARTITION, **params)
        orig_submit, orig_map = ex.submit, ex.map_array

        def submit(*a, **k):
            job = orig_submit(*a, **k)
            jobs.append(job)
            return job

        def map_array(*a, **k):
            out = orig_map(*a, **k)
            jobs.extend(out)
            return out

        ex.submit, ex.map_array = submit, map_array  # type: ignore[method-assign]
        return ex

    yield make
    ids = sorted({j.job_id.split("_")[0] for j in jobs})
    if ids:
        _run("scancel", *ids)


def _bounded(fn: Callable[[], Any], timeout_s: float) -> tuple[str, Any, float]:
    """Run fn in a daemon thread; returns (outcome, value_or_exc, seconds).

    outcome is "ok", "raised" or "hung" (did not return within timeout_s).
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["ok"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the caller
            box["raised"] = exc

    t0 = time.monotonic()
    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(timeout_s)
    elapsed = time.monotonic() - t0
    if th.is_alive():
        return "hung", None, elapsed
    key = "ok" if "ok" in box else "raised"
    return key, box[key], elapsed


def _wait_for(pred: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.5)


def _final_state(job: Any, timeout_s: float = 30) -> str:
    """State from a fresh sacct call, once Slurm has finished the job.

    job.state can be stale once the result file exists, and the result file is
    written a moment before the job step (and so the job) ends in Slurm.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        state = job.get_info(mode="force").get("State", "UNKNOWN")
        if not job.watcher.is_done(job.job_id, mode="cache") and time.monotonic() < deadline:
            time.sleep(1)
            continue
        return state


def _job_log(job: Any) -> str:
    parts = []
    for p in (job.paths.stdout, job.paths.stderr):
        try:
            parts.append(f"--- {p}\n{Path(p).read_text()[-3000:]}")
        except OSError:
            pass
    return "\n".join(parts)


# --------------------------------------------------------------------------- jobs
def gpu_task(index: int, folder: str, sleep_s: float) -> str:
    start = time.time()
    time.sleep(sleep_s)
    end = time.time()
    rec = {
        "index": index,
        "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "start": start,
        "end": end,
        "job_id": os.environ.get("SLURM_JOB_ID"),
        "array": f"{os.environ.get('SLURM_ARRAY_JOB_ID')}_{os.environ.get('SLURM_ARRAY_TASK_ID')}",
    }
    Path(folder, f"task{index}.json").write_text(json.dumps(rec))
    return rec["cvd"]


def sleep_forever(marker: str) -> None:
    Path(marker).write_text(str(time.time()))
    time.sleep(3600)


class TimeoutRequeuer(submitit.helpers.Checkpointable):
    """First run sleeps past its time limit; after the requeue it returns."""

    def __call__(self, folder: str) -> int:
        restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
        Path(folder, f"run{restarts}").write_text(str(time.time()))
        if restarts >= 1:
            return restarts
        time.sleep(3600)
        return -1

    def checkpoint(self, folder: str) -> Any:
        Path(folder, "checkpointed").write_text(str(time.time()))
        return super().checkpoint(folder)  # DelayedSubmission(self, folder): requeue


# --------------------------------------------------------------------------- tests
def test_gpu_array_parallelism(executor_factory, tmp_path: Path) -> None:
    """4-task array, 1 GPU each, at most 2 at once, concurrent tasks on different GPUs."""
    rec_dir = tmp_path / "records"
    rec_dir.mkdir()
    ex = executor_factory(
        gpus_per_node=1, slurm_array_parallelism=2, timeout_min=5, cpus_per_task=1, name="hg-array"
    )
    n = 4
    jobs = ex.map_array(gpu_task, range(n), [str(rec_dir)] * n, [6.0] * n)
    assert len(jobs) == n
    array_id = jobs[0].job_id.split("_")[0]
    show = _run("scontrol", "show", "job", array_id).stdout
    assert "ArrayTaskThrottle=2" in show, show

    outcome, cvds, secs = _bounded(lambda: [j.result() for j in jobs], 150)
    assert outcome == "ok", f"array did not finish cleanly ({outcome}: {cvds!r} after {secs:.0f}s)\n" + "\n".join(
        _job_log(j) for j in jobs
    )

    recs = sorted((json.loads(p.read_text()) for p in rec_dir.glob("task*.json")), key=lambda r: r["start"])
    assert len(recs) == n
    assert [r["cvd"] for r in sorted(recs, key=lambda r: r["index"])] == cvds
    for r in recs:
        assert r["cvd"] in {"0", "1"}, f"expected exactly one fake GPU per task, got CUDA_VISIBLE_DEVICES={r['cvd']!r}"

    # max number of tasks running at the same instant (sweep over start/end events)
    events = sorted([(r["start"], 1) for r in recs] + [(r["end"], -1) for r in recs], key=lambda e: (e[0], e[1]))
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    assert peak <= 2, f"slurm_array_parallelism=2 violated: {peak} tasks ran at once: {recs}"
    assert peak == 2, f"tasks never overlapped (2 CPUs, 2 GPUs, parallelism 2): {recs}"

    overlapping = [
        (a, b) for i, a in enumerate(recs) for b in recs[i + 1 :] if a["start"] < b["end"] and b["start"] < a["end"]
    ]
    assert overlapping
    for a, b in overlapping:
        assert a["cvd"] != b["cvd"], f"concurrent tasks shared a GPU: {a} / {b}"

    for j in jobs:
        assert _final_state(j) == "COMPLETED", (j.job_id, j.state)


def test_scancel_unblocks_result(executor_factory, tmp_path: Path) -> None:
    """A scancel'led job: result() raises promptly (sacct reports CANCELLED) instead of hanging."""
    marker = tmp_path / "started"
    ex = executor_factory(timeout_min=10, cpus_per_task=1, name="hg-cancel")
    job = ex.submit(sleep_forever, str(marker))
    _wait_for(marker.exists, 90, f"job {job.job_id} to start (squeue: {_run('squeue').stdout})")

    cancel = _run("scancel", job.job_id)
    assert cancel.returncode == 0, cancel.stderr

    outcome, value, secs = _bounded(job.result, 60)
    assert outcome != "hung", f"job.result() still blocked {secs:.0f}s after scancel (state={job.state})"
    assert outcome == "raised", f"job.result() returned {value!r} for a cancelled job"
    assert isinstance(value, submitit.core.utils.UncompletedJobError), repr(value)
    assert job.state.startswith("CANCELLED"), job.state  # what result() itself saw
    acct = _run("sacct", "-n", "-X", "-P", "-j", job.job_id, "-o", "State").stdout.split()
    assert acct and acct[0].startswith("CANCELLED"), acct


def test_timeout_checkpoint_requeue(executor_factory, tmp_path: Path) -> None:
    """1-minute job: USR2 before the limit -> checkpoint() -> scontrol requeue -> second run finishes."""
    folder = tmp_path / "requeue"
    folder.mkdir()
    # Slurm checks time limits / sends --signal warnings every ~30 s: a 59 s
    # warning lands 1-31 s into the run, always before the 60 s limit.
    ex = executor_factory(timeout_min=1, slurm_signal_delay_s=59, cpus_per_task=1, name="hg-requeue")
    job = ex.submit(TimeoutRequeuer(), str(folder))

    outcome, value, secs = _bounded(job.result, 200)
    assert outcome == "ok", f"requeued job did not finish ({outcome}: {value!r} after {secs:.0f}s)\n{_job_log(job)}"
    assert value >= 1, f"job finished without being requeued (SLURM_RESTART_COUNT={value})"
    assert (folder / "checkpointed").exists(), "checkpoint() was never called"
    assert (folder / "run0").exists() and (folder / "run1").exists()
    restarts = _run("scontrol", "show", "job", job.job_id).stdout
    if "Restarts=" in restarts:  # still within MinJobAge
        assert "Restarts=0" not in restarts, restarts
    assert _final_state(job) == "COMPLETED", job.state
    acct = _run("sacct", "-n", "-X", "-D", "-P", "-j", job.job_id, "-o", "State").stdout.split()
    assert acct[0] == "REQUEUED" and acct[-1] == "COMPLETED", acct
