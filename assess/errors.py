"""Domain exceptions. The CLI turns each into a one-line message and a non-zero exit."""

from __future__ import annotations

# The run directory's own errors belong to its contract; re-exported for assess's callers.
from render.rundir.errors import InvalidRunDirectory, NoRunsFound, NotARunDirectory, RunDirError  # noqa: F401


class AssessError(Exception):
    """Base class: the message is written for the user (what is wrong, what to do)."""


class Refused(AssessError):
    """Bad input refused before anything ran or was written: exit 2, as a launch's preflight."""


class IndexSchemaError(AssessError):
    """The index was written by a newer assess, or is not an assess index."""


class IndexDamaged(AssessError):
    """The index file cannot be read by sqlite (truncated, overwritten, another kind of file)."""


class IndexUnwritable(AssessError):
    """The index cannot be created or written where --db (or $HYPERGRID_INDEX) points."""


class UnknownMetric(AssessError):
    """A metric name that is not in the registry."""


class NotScored(AssessError):
    """A report or query needs runs that are not in the index yet."""
