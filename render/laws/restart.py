"""An honest restart: an experiment whose ledger is gone (every copy lost, or a fresh state folder on a machine whose
holdout lock names the experiment's earlier final) starts over only by a command, never by deleting files:

    assess climb <name> --restart "<why>"

It begins a new ledger whose first entry (`restart`) names, with its reason, every trace of the earlier ledger it
supersedes (their ledger heads and origins) and every claim or final the holdout lock records for the experiment; the
same is recorded in every holdout lock (`restart`). From then on the earlier evidence is another body of evidence
(its runs kept apart, never ranked; its spend still counted), the holdout lock no longer refuses this experiment's
claim on the texts its earlier final used, and every later verdict on that holdout says it is a reuse
(`reuse_note`). An experiment whose ledger is here is never restarted: a new climb takes a new name.
"""

from __future__ import annotations

from typing import Any, Iterable

from render.laws.anchor import ExperimentGuard
from render.laws.ledger import Kind, Ledger, superseded

__all__ = ["RESTART", "restart", "reuse_note", "superseded"]

RESTART = "restart"  # the lock's kind of line for a restart (render.laws.lock)


def restart(ledger: Ledger, reason: str, found: Iterable[Any]) -> dict[str, Any]:
    """Start `ledger` over (its first entry, `restart`) superseding the earlier ledger that `found` (render.laws.evidence
    traces) and the holdout lock prove; ExperimentGuard when there is no reason, the ledger is here, or nothing proves
    an earlier one."""
    from render.laws.lock import lock_files, record_use, uses

    if not reason.strip():
        raise ExperimentGuard(f"experiment {ledger.name}: a restart needs its reason: --restart \"<why>\"")
    traces = list(found)
    with ledger.lock():
        if ledger.entries():
            raise ExperimentGuard(
                f"experiment {ledger.name}: its ledger is here ({ledger.state_copy}), so nothing is restarted: a restart "
                "starts over an experiment whose ledger is gone. To climb again from nothing, give the climb a new "
                "experiment.name (and a fresh holdout manifest)")
        if not any(t.proves_ledger for t in traces):
            raise ExperimentGuard(f"experiment {ledger.name}: nothing to restart (no trace of an earlier ledger); launch "
                                  "it as usual")
        used = [u for u in uses(lock_files(ledger)) if u.get("experiment") == ledger.name and u.get("origin")]
        supersedes = sorted({str(t.head) for t in traces if t.head} | {str(u["origin"]) for u in used})
        entry = ledger.append(
            Kind.RESTART, reason=reason, supersedes=supersedes,
            traces=[{"path": t.path, "what": t.what, "head": t.head} for t in traces],
            holdout_uses=[{k: u.get(k) for k in ("kind", "at", "origin", "state", "out_root", "file")} for u in used])
        identities = {i for u in used for i in u.get("identities", [])}
        if identities:
            record_use(ledger, RESTART, identities, supersedes=supersedes, reason=reason)
        return entry


def reuse_note(ledger: Ledger) -> str | None:
    """What every verdict on the holdout says after a restart over a holdout already used: None when the restart
    superseded no claim or final (or there was no restart)."""
    entry = ledger.first(Kind.RESTART)
    used = (entry or {}).get("holdout_uses") or []
    if entry is None or not used:
        return None
    first = used[0]
    return (f"a reuse of the holdout: this experiment's earlier ledger (origin {first.get('origin')}) "
            f"{'claimed its final' if first.get('kind') == 'claim' else 'completed its final'} on these texts on "
            f"{first.get('at', '?')}; restarted on {entry.get('at', '?')} (why: {entry.get('reason')})")
