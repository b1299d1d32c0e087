"""One final per experiment, by evidence: claimed once in the ledger, its token spent when it completes, its
result recorded there, so `--final` from any folder that shares the user's state finds it."""

from __future__ import annotations

import secrets
from typing import Any, Sequence

from render.errors import RenderError
from render.laws.ledger import Kind, Ledger
from render.compose.splits import Prompt


class FinalAlreadyClaimed(RenderError, RuntimeError):
    """The experiment's final holdout run was already claimed."""


def final_record(ledger: Ledger) -> dict[str, Any] | None:
    """The experiment's claim of its final, from whichever copy of its ledger keeps it."""
    return ledger.first(Kind.CLAIM)


def final_result(ledger: Ledger) -> dict[str, Any] | None:
    """The finished final's result (the comparison under the rule in force at its claim), or None."""
    entry = ledger.latest(Kind.FINAL_RESULT)
    return None if entry is None else entry["result"]


def claim_final(ledger: Ledger, payload: dict[str, Any], holdout_content: str | None = None,
                holdout: Sequence[Prompt] = ()) -> dict[str, Any]:
    """Claim the final exactly once, under the ledger's lock: refused when any copy of the ledger holds a claim, or
    when another experiment's final claimed texts of `holdout` (spent per content); returns the claim with the
    token its commands must carry."""
    from render.laws.holdout import spent_elsewhere
    from render.laws.lock import machine_lock, record_use
    from render.rundir import exclusive, holdout_identity

    # the ledger's lock, then the machine's: two state folders (which share no ledger lock) cannot both claim
    with ledger.lock(), exclusive(machine_lock().with_name(f".{machine_lock().name}.lock"), wait=True):
        first = final_record(ledger)
        if first is not None:
            raise FinalAlreadyClaimed(f"experiment {ledger.name}: the final holdout run was already claimed on "
                                      f"{first.get('at', '?')}; the holdout is spent and cannot be rendered again")
        spent = spent_elsewhere(ledger, holdout)
        if spent:
            raise FinalAlreadyClaimed(f"experiment {ledger.name}: the holdout is spent: {spent}")
        claim = ledger.append(Kind.CLAIM, holdout_content=holdout_content, **{"token": secrets.token_hex(8), **payload})
        record_use(ledger, "claim", (holdout_identity(p.text) for p in holdout), holdout_content=holdout_content)
        return claim


def complete_final(ledger: Ledger, claim: dict[str, Any], result: dict[str, Any]) -> None:
    """The final is done: its result is recorded and its token spent (it opens no holdout sample any more)."""
    from render.laws.lock import record_use

    with ledger.lock():
        if final_result(ledger) is None:
            ledger.append(Kind.FINAL_RESULT, result=result, token=claim.get("token"))
            identities = {i for e in ledger.entries(Kind.HOLDOUT)
                          if claim.get("holdout_content") in (None, e.get("content")) for i in e.get("identities", [])}
            record_use(ledger, "final", identities, holdout_content=claim.get("holdout_content"))
        if not any(e.get("token") == claim.get("token") for e in ledger.entries(Kind.TOKEN_SPENT)):
            ledger.append(Kind.TOKEN_SPENT, token=claim.get("token"))
