"""render's exception base: every error render raises on purpose derives from `RenderError`.

Callers at an edge (preflight, the CLI, the launchers) catch `RenderError` and turn it into a user
message; anything else is a bug and keeps its traceback. Subclasses also derive from the builtin
they used to be (ValueError for bad values, RuntimeError for failures while rendering), so code
that caught those keeps working.
"""


class RenderError(Exception):
    """Base of render's own exceptions."""


class ConfigError(RenderError, ValueError):
    """A config value that composes but cannot be rendered."""
