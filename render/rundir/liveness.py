"""Is the process (or SLURM job, or Ray job) that wrote a run directory, or holds a reservation, still there?"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from datetime import datetime
from typing import Any

from render.rundir.states import CellState

SLURM_ACTIVE = {"RUNNING", "PENDING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "STAGE_OUT"}


def host_identity() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def pid_alive(pid: int, started_at: datetime | None = None) -> bool:
    """The process exists, is not a zombie, and was started before `started_at` (not a reused pid)."""
    import psutil

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        created = process.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return psutil.pid_exists(pid) if pid > 0 else False
    return started_at is None or created <= started_at.timestamp() + 1.0


def _slurm(cmd: list[str]) -> str | None:
    """stdout of a SLURM command, or None when it is not installed or fails."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def slurm_state(job_id: str) -> tuple[CellState, str]:
    """(running | crashed | unknown, detail) of a SLURM job, from squeue, then sacct."""
    queued = _slurm(["squeue", "-h", "-j", job_id, "-o", "%T"])
    if queued and queued.split():
        state = queued.split()[0].upper()
        if state in SLURM_ACTIVE:
            return CellState.RUNNING, f"slurm job {job_id} {state}"
    accounted = _slurm(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"])
    if accounted and accounted.split():
        state = accounted.split()[0].upper()
        if state in SLURM_ACTIVE:
            return CellState.RUNNING, f"slurm job {job_id} {state}"
        return CellState.CRASHED, f"slurm job {job_id} {state}"
    if queued is None and accounted is None:
        return CellState.UNKNOWN, f"slurm job {job_id}: squeue/sacct not available here"
    return CellState.CRASHED, f"slurm job {job_id} is not in squeue or sacct"


RAY_ACTIVE = {"PENDING", "RUNNING"}


def ray_job_state(dashboard: str, job_id: str) -> tuple[CellState, str]:
    """(running | crashed, detail) of a Ray job, from its cluster's job server (the dashboard's REST API). A server
    that does not answer is a cluster gone, and its jobs with it: a job's driver runs on the cluster's head."""
    import json
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{dashboard.rstrip('/')}/api/jobs/{job_id}", timeout=10) as answer:
            state = str(json.loads(answer.read()).get("status", "")).upper()
    except urllib.error.HTTPError as error:
        return CellState.CRASHED, f"ray job {job_id}: {dashboard} does not know it (HTTP {error.code})"
    except (OSError, ValueError) as error:
        return CellState.CRASHED, f"ray job {job_id}: no job server answers at {dashboard} ({error})"
    if state in RAY_ACTIVE:
        return CellState.RUNNING, f"ray job {job_id} {state}"
    return CellState.CRASHED, f"ray job {job_id} {state or 'in no known state'}"


def writer_state(record: dict[str, Any], *, ask_slurm: bool = True) -> tuple[CellState, str]:
    """running / crashed / unknown for the process that wrote `record` (run.json or SWEEP.json: host, pid,
    started_at, and job.slurm_job_id when it ran under SLURM)."""
    from render.rundir.records import parse_time

    job = record.get("job") or {}
    if job.get("slurm_job_id"):
        return slurm_state(str(job["slurm_job_id"])) if ask_slurm else (CellState.UNKNOWN, "slurm job not asked")
    host, pid = record.get("host"), record.get("pid")
    if not isinstance(pid, int):
        return CellState.UNKNOWN, "no pid recorded"
    if host != socket.gethostname():
        return CellState.RUNNING, f"on host {host} (pid {pid}, not checked from here)"
    if pid_alive(pid, parse_time(record.get("started_at"))):
        return CellState.RUNNING, f"pid {pid}"
    return CellState.CRASHED, f"pid {pid} is gone"
