"""Whether the Hugging Face hub can be reached from here: a leaf module, so that everything that fetches from
the hub (models at preflight, prompt suites' dataset files, the metrics' models) asks the same question the
same way: through the HTTPS proxy when one is set, with a timeout on the DNS lookup too, once per process."""

from __future__ import annotations

import os
import socket
import threading
from urllib.parse import urlparse

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
