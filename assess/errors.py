"""Domain exceptions, and whether an error is the disk running out. The CLI turns each into a one-line message and a
non-zero exit."""

from __future__ import annotations

import os
from pathlib import Path

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


def disk_full(exc: BaseException, where: Path | str | None = None) -> bool:
    """Whether an error is the disk (or quota) running out: ENOSPC / EDQUOT, or sqlite's words for it ("database
    or disk is full"; "disk I/O error" when the folder of `where` has no space left)."""
    import errno

    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc)
    if "database or disk is full" in text:
        return True
    if "disk I/O error" in text and where is not None:
        try:
            stats = os.statvfs(Path(where).absolute().parent)
        except OSError:
            return False
        return stats.f_bavail * stats.f_frsize < (1 << 20)
    return False
