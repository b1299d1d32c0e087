"""The axes' own error: a value or a combination that cannot run (refused at preflight, exit 2)."""

from __future__ import annotations

from render.errors import RenderError


class AxisError(RenderError, ValueError):
    """An axis value that cannot run here or with the rest of the cell, with the reason and what would."""
