"""Whether the Hugging Face hub can be reached from here: a leaf module, so that everything that fetches
from the hub (models at preflight, prompt suites' dataset files) asks the same question the same way."""

from __future__ import annotations

import functools
import socket
from urllib.parse import urlparse


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
