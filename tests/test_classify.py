"""classify: the FAILED.json category of each kind of failure a cell can end with."""

from __future__ import annotations

import pytest

from render.axes.attention import BackendUnavailable
from render.run.runner import Cancelled, NonFiniteOutput, classify


class OutOfMemoryError(RuntimeError):  # torch.cuda.OutOfMemoryError, recognised by name (no torch import needed)
    pass


class UncompletedJobError(RuntimeError):  # submitit's, recognised by name
    pass


@pytest.mark.parametrize("error,category", [
    (OutOfMemoryError("CUDA error"), "oom"),
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "oom"),
    (MemoryError(), "oom"),  # out of memory on the CPU: numpy, PIL and torch's CPU allocator raise it bare
    (MemoryError("Unable to allocate 3.00 GiB for an array with shape (1, 3, 16384, 16384)"), "oom"),
    (BackendUnavailable("attention=flash needs a CUDA GPU"), "backend-unavailable"),
    (RuntimeError("Backend flash_attn is not usable because the package is missing"), "backend-unavailable"),
    (RuntimeError("attention backend 'sage' is not available"), "backend-unavailable"),
    (NonFiniteOutput("sample ('a', seed 0) has non-finite pixels"), "non-finite-output"),
    (Cancelled("SIGTERM"), "cancelled"),
    (KeyboardInterrupt(), "cancelled"),
    (SystemExit(0), "cancelled"),
    (TimeoutError("took too long"), "timeout"),
    (UncompletedJobError("Job 12 (task: 0) with path ... has timed-out"), "timeout"),
    (UncompletedJobError("Job 12 has not produced any output (state: FAILED)"), "error"),
    (RuntimeError("this feature is not available"), "error"),
    (ValueError("bad"), "error"),
])
def test_each_failure_gets_its_category(error: BaseException, category: str) -> None:
    assert classify(error) == category
