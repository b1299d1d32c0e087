"""The contract's names, declared once: a cell's state and a failure's category (optuna's `TrialState`).

`str`-valued, so records hold the same JSON strings as before and a value read back from a file
compares equal to its member; code compares members, never string literals.
"""

from __future__ import annotations

from enum import Enum


class Name(str, Enum):
    """An Enum whose members are their values wherever text is made (str(), f-strings, JSON)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    def __hash__(self) -> int:  # Enum hashes the member's name: a dict keyed by the value would not find it
        return hash(self.value)


class CellState(Name):
    """Where a cell stands: a terminal record says done or failed; without one, its writer's liveness decides."""

    DONE = "done"  # DONE.json
    FAILED = "failed"  # FAILED.json
    RUNNING = "running"  # no terminal record, its writer is alive
    CRASHED = "crashed"  # no terminal record, its writer is gone
    PENDING = "pending"  # listed in SWEEP.json, no run directory yet
    ABORTED = "aborted"  # pending, and the sweep's process is gone
    SUBMITTED = "submitted"  # handed to a scheduler that was not waited for (hydra.launcher.wait=false)
    UNKNOWN = "unknown"
    UNREADABLE = "unreadable"  # its run.json or the sweep's SWEEP.json cannot be parsed: named, never guessed


class Category(Name):
    """FAILED.json's `category`."""

    OOM = "oom"
    TIMEOUT = "timeout"
    BACKEND_UNAVAILABLE = "backend-unavailable"
    NON_FINITE_OUTPUT = "non-finite-output"
    CANCELLED = "cancelled"
    ERROR = "error"

    @property
    def transient(self) -> bool:
        """The cell did not fail on its own account (stopped, out of time): a requeue or a new launch takes it up again."""
        return self in (Category.CANCELLED, Category.TIMEOUT)

    @classmethod
    def is_transient(cls, value: str | None) -> bool:
        """`transient` of a recorded category (an index row, a record): an unknown value or none is not."""
        return value in {c.value for c in cls if c.transient}


# A scheduler's final job state (SLURM's, as submitit reports it) -> the category of the cells it left unfinished.
_JOB_STATES = (("CANCEL", Category.CANCELLED), ("TIMEOUT", Category.TIMEOUT),
               ("DEADLINE", Category.TIMEOUT), ("OUT_OF_MEMORY", Category.OOM))


def category_of_job_state(state: str) -> Category | None:
    """The category a scheduler's job state means, None when it says nothing more than "failed"."""
    upper = state.upper()
    return next((category for word, category in _JOB_STATES if word in upper), None)
