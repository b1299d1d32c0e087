"""The render process's stop signals: the first cancels, the ones that follow (Ctrl-C reaching the whole process
group while a parent forwards its own signal) wait until the cell has recorded the first."""

from __future__ import annotations

import os
import signal
import time

import pytest

from render.app import cancellable


@pytest.mark.parametrize("first,second", [(signal.SIGTERM, signal.SIGINT), (signal.SIGINT, signal.SIGTERM),
                                          (signal.SIGTERM, signal.SIGTERM)])
def test_a_second_signal_does_not_interrupt_the_recording_of_the_first(first: signal.Signals, second: signal.Signals) -> None:
    recorded = []
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))  # SIG_IGN for SIGINT in a background job
    with pytest.raises(SystemExit) as exit_:
        with cancellable():
            try:
                os.kill(os.getpid(), first)
                time.sleep(5)
                pytest.fail("the first signal was not raised")
            except BaseException as error:  # as runner._run_cell records every failure, cancellation included
                if not isinstance(error, Exception):
                    os.kill(os.getpid(), second)
                    time.sleep(0.2)  # FAILED.json is written here
                    recorded.append(type(error).__name__)
                raise
    assert recorded and exit_.value.code == 128 + first
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before  # the handlers are restored
