"""The export's user errors: a tracker that is not installed or cannot be reached (exit 2, nothing written)."""

from assess.errors import AssessError


class TrackerUnavailable(AssessError):
    """The tracker's client is missing or its server does not answer; nothing was written."""
