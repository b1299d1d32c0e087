"""What run.json records about the software and machine a cell ran on. The packages and the project's git
state are read once per process (the code a process runs is the code it imported), not once per cell."""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from render.rundir.redact import RECORDED_ENV, redact

PACKAGES = ("torch", "diffusers", "torchao", "transformers", "accelerate", "hydra-core", "hypergrid")  # torchao: a winner file names it (assess.winner)


def versions() -> dict[str, str | None]:
    return dict(_versions())


@functools.cache
def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def git_state() -> dict[str, Any]:
    """The project's git revision when it runs from a checkout (editable install), else nulls."""
    return dict(_git_state())


@functools.cache
def _git_state() -> dict[str, Any]:
    root = Path(__file__).resolve().parents[2]
    try:
        revision = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if revision.returncode != 0:
            return {"revision": None, "dirty": None}
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=10)
        return {"revision": revision.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.TimeoutExpired):
        return {"revision": None, "dirty": None}


def device_info(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {"kind": "cpu", "name": platform.processor() or platform.machine(), "count": os.cpu_count(),
                            "cuda_visible_devices": recorded_env("CUDA_VISIBLE_DEVICES")}
    if device.startswith("cuda"):
        import torch

        index = torch.device(device).index or 0
        info.update(kind="cuda", name=torch.cuda.get_device_name(index), count=torch.cuda.device_count(),
                    total_memory=torch.cuda.get_device_properties(index).total_memory, cuda=torch.version.cuda)
    return info


def job_info(launcher: str) -> dict[str, Any]:
    return {"launcher": launcher, "slurm_job_id": recorded_env("SLURM_JOB_ID"),
            "slurm_array_job_id": recorded_env("SLURM_ARRAY_JOB_ID"),
            "slurm_array_task_id": recorded_env("SLURM_ARRAY_TASK_ID")}


def recorded_env(name: str) -> str | None:
    """An environment variable's value for a record: only those on the allow-list (render.rundir.redact.RECORDED_ENV),
    redacted; asking for another is a programming error."""
    if name not in RECORDED_ENV:
        raise ValueError(f"environment variable {name!r} is not on the allow-list of recorded ones: "
                         f"{', '.join(RECORDED_ENV)}")
    value = os.environ.get(name)
    return None if value is None else redact(value)
