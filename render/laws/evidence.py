"""Evidence beyond the ledger: the run directories that name an experiment (under each of its out_roots and every
folder registered there) are read beside its ledger, and a run the ledger cannot account for is refused, never
silently mixed.

A run names its experiment in its run.json (`config.experiment.name`). When such runs exist but no copy of the
ledger has the experiment's frozen rule (every copy deleted mid-climb, or the experiment launched from a state
folder whose copies this one cannot see), a launch is refused before anything is written: its rule, anchor and
holdout cannot be checked against the first launch's.
"""

from __future__ import annotations

from typing import Any

from render.laws.anchor import ExperimentGuard
from render.laws.ledger import Ledger


def runs_naming(ledger: Ledger, history: Any) -> list[Any]:
    """The runs of `history` whose run.json names the experiment."""
    return [run for run in history.runs
            if ((run.run.get("config") or {}).get("experiment") or {}).get("name") == ledger.name]


def check_evidence(ledger: Ledger, history: Any) -> None:
    """Refuse a launch when runs name the experiment but its ledger has no frozen rule in any copy."""
    if ledger.first("rule") is not None:
        return
    runs = runs_naming(ledger, history)
    if not runs:
        return
    copies = ", ".join(str(p) for p in ledger.copies())
    raise ExperimentGuard(
        f"experiment {ledger.name}: {len(runs)} run(s) name it (e.g. {runs[0].path}), but no copy of its ledger has "
        f"its frozen rule ({copies}): the copies were deleted, or it was launched with another $HYPERGRID_STATE and "
        "another out_root. Its rule, anchor and holdout cannot be checked; nothing was launched. Restore a copy "
        "(a `ledger.jsonl.replaced-*` beside it, a backup), run with the state folder that launched it, or give this "
        "climb a new experiment.name")
