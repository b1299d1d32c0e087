"""Domain exceptions. The CLI turns each into a one-line message and a non-zero exit."""

from __future__ import annotations


class AssessError(Exception):
    """Base class: the message is written for the user (what is wrong, what to do)."""


class NotARunDirectory(AssessError):
    """A path given as a run directory has no run.json."""


class NoRunsFound(AssessError):
    """A sweep folder (or any folder) without a single run directory below it."""


class InvalidRunDirectory(AssessError):
    """A run directory breaks the contract (docs/run-directory.md): bad run.json, bad record."""


class IndexSchemaError(AssessError):
    """The index was written by a newer assess, or is not an assess index."""


class UnknownMetric(AssessError):
    """A metric name that is not in the registry."""


class NotScored(AssessError):
    """A report or query needs runs that are not in the index yet."""
