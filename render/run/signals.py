"""Stopping on request: SIGTERM (kill, schedulers) and SIGINT (Ctrl-C) reach every process of the tool.

A process that renders turns the first of them into `Cancelled`, which the interrupted cell records as
FAILED.json `cancelled`; further signals are ignored meanwhile, so a Ctrl-C that reaches the whole process
group and the same signal forwarded by a parent cannot interrupt the recording. A process that runs
another (the climb's render command, a launcher's jobs) passes the signal on and waits for it to end.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Cancelled(BaseException):
    """The process was asked to stop: a BaseException, so no library's `except Exception` swallows it."""

    def __init__(self, message: str, signum: int = signal.SIGTERM) -> None:
        super().__init__(message)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@contextmanager
def _handlers(handler: Callable[[int, Any], None]) -> Iterator[None]:
    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


@contextmanager
def cancel_on_signals() -> Iterator[None]:
    """Within: the first SIGTERM or SIGINT raises `Cancelled`; later ones are ignored until the block ends."""

    def cancel(signum: int, frame: Any) -> None:
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        raise Cancelled(f"received {signal.Signals(signum).name}", signum)

    with _handlers(cancel):
        yield


class Forwarded:
    """The stop signal a parent received and passed on to its children (None: none yet)."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def raise_if_stopped(self, what: str) -> None:
        if self.signum is not None:
            raise Cancelled(f"received {signal.Signals(self.signum).name}; {what}", self.signum)


@contextmanager
def forward_signals(send: Callable[[int], None]) -> Iterator[Forwarded]:
    """Within: SIGTERM and SIGINT are passed on with `send(signum)` (the first one), not raised here, so the
    caller keeps waiting for its children to record the cancellation and end; it then calls
    `forwarded.raise_if_stopped(...)`."""
    forwarded = Forwarded()

    def forward(signum: int, frame: Any) -> None:
        if forwarded.signum is None:
            forwarded.signum = signum
            send(signum)

    with _handlers(forward):
        yield forwarded


@contextmanager
def note_signals() -> Iterator[Forwarded]:
    """Within: SIGTERM and SIGINT are only noted (`noted.signum`, the first one), for a server's loop to poll. The
    handler takes no lock and raises nothing: a handler that set a threading.Event could wait forever on the lock the
    interrupted Event.wait holds, and an exception raised in a server's cleanup would leave it half done."""
    with forward_signals(lambda signum: None) as noted:
        yield noted


def send_to(process: subprocess.Popen) -> Callable[[int], None]:
    """A `send` for forward_signals: the signal to one child process, if it still runs."""

    def send(signum: int) -> None:
        if process.poll() is None:
            process.send_signal(signum)

    return send
