"""The speed axes' own error: a value or a combination that cannot run (refused at preflight, exit 2)."""

from __future__ import annotations

from render.errors import RenderError


class AxisError(RenderError, ValueError):
    """A compile, quant, offload or toggle value that cannot run here, with the reason."""
