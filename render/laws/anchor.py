"""The anchor is frozen by content: the cell an experiment recorded at its first launch (its canonical config,
the model's weights identity included) is the only reference its comparisons may use."""

from __future__ import annotations

import json
from typing import Any

from render.errors import RenderError
from render.laws.ledger import Kind, Ledger


class ExperimentGuard(RenderError, ValueError):
    """A sweep the experiment's rules forbid; nothing was launched or written."""


def frozen_anchor(ledger: Ledger) -> dict[str, Any] | None:
    """The anchor cell recorded at the experiment's first launch (its ledger's first `anchor` entry)."""
    return ledger.first(Kind.ANCHOR)


def check_anchor(ledger: Ledger, anchor: Any) -> None:
    """A cell whose anchor differs from the recorded one (an edited model config, other weights in the same
    folder, a same-named option elsewhere on the search path) is refused with both configs shown."""
    recorded = frozen_anchor(ledger)
    if recorded is not None and recorded["cell_key"] != anchor.key:
        raise ExperimentGuard(
            f"experiment {ledger.name}: the anchor is frozen, and this run's differs (an edited model config, other "
            f"weights under the same model id or folder, or a same-named option elsewhere on the search path).\n"
            f"  recorded: {json.dumps(recorded['cell'], sort_keys=True)}\n"
            f"  this run: {json.dumps(anchor.canonical(), sort_keys=True)}\nA different reference needs a new experiment")


def record_anchor(ledger: Ledger, anchor: Any) -> None:
    if frozen_anchor(ledger) is None:
        ledger.append(Kind.ANCHOR, cell_key=anchor.key, cell=anchor.canonical())
