"""Reaching a Ray cluster for hydra/launcher=ray (hydra_plugins.hypergrid.ray_cluster): what the sweeper's preflight
asks before anything is written, and what the launcher submits through. Imports Ray only when asked."""

from __future__ import annotations

import logging
from typing import Any


class RayUnavailable(RuntimeError):
    """No Ray cluster can be reached, or it has no GPU for the sweep's jobs."""


def reachable(address: str, seconds: float = 5.0) -> str | None:
    """Why the cluster at a `host:port` or `ray://host:port` address cannot be reached (a TCP connect within
    `seconds`; an empty address is refused as a malformed one is: `address=$RAY_ADDRESS` unset), or None; `auto` is left to Ray, which fails at once when no cluster runs here. Ray itself retries an
    unreachable address for minutes."""
    import socket

    if not address.strip():
        return "empty (a variable that is not set?): give auto, host:port or ray://host:port, or leave the key out " \
               "for a local cluster started for the sweep"
    if address in ("auto", "local"):
        return None
    host, _, port = address.split("://")[-1].rpartition(":")
    if not host or not port.isdigit():
        return f"{address!r} is not an address: give auto, host:port or ray://host:port"
    try:
        socket.create_connection((host, int(port)), timeout=seconds).close()
    except OSError as error:
        return f"nothing answers at {host}:{port} ({error.strerror or error})"
    return None


def connect(address: str | None, gpus: int | None) -> Any:
    """ray.init against `address`, or a local cluster started for the sweep declaring `gpus` GPUs."""
    import ray

    if ray.is_initialized():
        return ray
    problem = reachable(address) if address is not None else None  # None: a local cluster; "" is no address
    if problem:
        raise RayUnavailable(f"hydra.launcher.address={address!r}: {problem}; nothing was submitted. Start the "
                             "cluster (`ray start --head --num-gpus=N`), or give the address it prints")
    try:
        if address is not None:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        else:
            ray.init(num_gpus=gpus, logging_level=logging.WARNING, log_to_driver=False, include_dashboard=False)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise RayUnavailable(f"hydra/launcher=ray: no Ray cluster at {address or 'a local cluster started for the sweep'} "
                             f"({str(error).splitlines()[0]}); nothing was submitted. Start one (`ray start --head "
                             "--num-gpus=N`), or give hydra.launcher.address=auto|ray://host:10001") from None
    return ray


def cluster_gpus(address: str | None, gpus: int | None) -> int:
    """The GPUs the cluster declares (RayUnavailable when none: a task asks one at least)."""
    ray = connect(address, gpus if address is None else None)
    count = int(ray.cluster_resources().get("GPU", 0))
    if count < 1:
        raise RayUnavailable(f"hydra/launcher=ray: the Ray cluster at {address or 'this machine'} declares no GPU; every job "
                             "asks one. Start it with GPUs (`ray start --head --num-gpus=N`), or give "
                             "hydra.launcher.gpus=N for the local cluster started for the sweep")
    return count
