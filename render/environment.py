"""Checks of the machine a render runs on, made before anything is written: folders it must write,
and models it must load."""

from __future__ import annotations

import functools
import os
import socket
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from render.cell import ConfigError


def check_writable_folder(folder: str | Path, what: str) -> None:
    """`folder` exists as a writable folder, or can be created: else a ConfigError naming it."""
    path = Path(folder).expanduser().absolute()
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{what}={folder}: cannot be created, {probe} is a file, not a folder; "
                          f"choose another {what}")
    if not os.access(probe, os.W_OK | os.X_OK):
        verb = "is not writable" if probe == path else f"cannot be created: {probe} is not writable"
        raise ConfigError(f"{what}={folder}: {verb} by this user; choose another {what}")


@functools.lru_cache(maxsize=None)
def hub_reachable(timeout_s: float = 2.0) -> bool:
    """Whether the Hugging Face hub answers a TCP connection (once per process, within `timeout_s`)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout=timeout_s).close()
    except OSError:
        return False
    return True


def check_hub_model(model: Any) -> None:
    """A hub model must be in the local cache, or the hub reachable to download it."""
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(model.id, "model_index.json", revision=model.revision)
    if isinstance(cached, str) or hub_reachable():
        return
    raise ConfigError(hub_unavailable_message(model.id))


def hub_unavailable_message(model_id: str) -> str:
    return (f"model.id={model_id}: not in the local Hugging Face cache, and the hub cannot be reached from here. "
            f"Download it where the hub is reachable (`hf download {model_id}`; HF_HOME sets the cache folder), "
            f"or point the model at a local folder written by save_pretrained: model.id=/path/to/{model_id.split('/')[-1]}")


def slurm_controller_problem(timeout_s: float = 15) -> str | None:
    """Why no job can be submitted from here (no SLURM commands, controller down), or None when it answers."""
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        return "the SLURM commands (scontrol, sbatch) are not installed on this machine"
    except subprocess.TimeoutExpired:
        return f"`scontrol ping` did not answer within {timeout_s:.0f} s"
    answer = (ping.stdout + ping.stderr).strip()
    if ping.returncode != 0 or "UP" not in answer:
        return f"`scontrol ping` says: {answer.splitlines()[0] if answer else f'exit {ping.returncode}'}"
    return None
