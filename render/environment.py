"""Checks of the machine a render runs on, made before anything is written: folders it must write,
and models it must load."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from render.cell import ConfigError


def check_writable_folder(folder: str | Path, what: str) -> None:
    """`folder` exists as a writable folder, or can be created: else a ConfigError naming it and why.

    Permission bits do not tell (root passes them; /proc, a read-only mount or a full quota refuse
    anyway), so the nearest existing folder is really tried: a probe folder is made in it and removed,
    and nothing is left behind."""
    path = Path(folder).expanduser().absolute()
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{what}={folder}: cannot be created, {probe} is a file, not a folder; choose another {what}")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".hypergrid-probe-", dir=probe))
    except OSError as error:
        verb = "is not writable" if probe == path else f"cannot be created in {probe}"
        raise ConfigError(f"{what}={folder}: {verb} ({error.strerror or error}); choose another {what}") from None


HUB_PROBE_TIMEOUT_S = 2.0
_PROBED: dict[tuple[str, int, float], bool] = {}  # (host, port, timeout) -> reached: one probe per process


def hub_address() -> tuple[str, int]:
    """Where a connection to the Hugging Face hub goes first: the HTTPS proxy when one is set, else the hub's endpoint."""
    from huggingface_hub import constants

    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    target = urlparse(proxy or constants.ENDPOINT)
    return target.hostname or "", target.port or (443 if target.scheme == "https" else 80)


def hub_reachable(timeout_s: float = HUB_PROBE_TIMEOUT_S) -> bool:
    """Whether the hub can be reached from here: never under HF_HUB_OFFLINE; else one TCP connection to
    `hub_address()` within `timeout_s`, the DNS lookup included (once per process and address)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    address = hub_address()
    key = (*address, timeout_s)
    if key not in _PROBED:
        reached: list[bool] = []

        def connect() -> None:
            try:
                socket.create_connection(address, timeout=timeout_s).close()
                reached.append(True)
            except OSError:
                pass

        probe = threading.Thread(target=connect, daemon=True)  # a thread: getaddrinfo has no timeout of its own
        probe.start()
        probe.join(timeout_s)
        _PROBED[key] = bool(reached)
    return _PROBED[key]


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
