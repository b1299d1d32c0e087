"""Errors of the run-directory contract. Each message is written for the user."""

from __future__ import annotations

from render.errors import RenderError


class RunDirError(RenderError):
    """Base class of the contract's errors."""


class NotARunDirectory(RunDirError):
    """A path given as a run directory has no run.json."""


class NoRunsFound(RunDirError):
    """A sweep folder (or any folder) without a single run directory below it."""


class InvalidRunDirectory(RunDirError):
    """A run directory breaks the contract (docs/run-directory.md): bad run.json, bad record."""


class UnsafeName(RunDirError, ValueError):
    """A value that would become part of a path could leave its folder."""


class ShortWrite(RunDirError, OSError):
    """A write stored fewer bytes than it was given (disk full, quota): nothing of it is kept."""
