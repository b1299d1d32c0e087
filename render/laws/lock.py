"""The holdout's lock beyond any one ledger: every final's claim (the holdout's one use) and completion, recorded by
the holdout identities of its texts where every other experiment, state folder and out_root can see it.

    $HYPERGRID_LOCK                               the machine-wide lock; default <cache>/holdout-lock.jsonl, where
                                                  <cache> is $HYPERGRID_CACHE or ~/.cache/hypergrid
    <out_root>/.hypergrid/holdout-lock.jsonl      in every out_root the experiment's ledger knows

A ledger is one experiment's evidence; a user with a fresh state folder and a new out_root, or an experiment of
another name, sees none of it. The lock is what they see: a claim is refused while any lock file it can read names
a claim or a final on one of its texts by another body of evidence (another experiment, or the same name with
another ledger: another `origin`, the digest of its chain's first entry). The experiment's own claim (its origin)
is not in its way: a claimed final that did not finish is resumed. The lock is append-only JSON lines; it holds no
secret (no token), and a lost line costs one route of evidence, never a wrong answer.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any, Iterable

from render.laws.ledger import Ledger, superseded
from render.rundir import STATE_DIR, append_to_copies, contains, host_identity, now_iso, read_lines

LOCK_ENV = "HYPERGRID_LOCK"
LOCK_FILE = "holdout-lock.jsonl"


def machine_lock() -> Path:
    """The machine-wide lock file: `$HYPERGRID_LOCK`, else a fixed place in the user's home. It does not follow
    `$HYPERGRID_CACHE`, which people move for disk space (a lock that moved with it would forget every final)."""
    env = os.environ.get(LOCK_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "hypergrid" / LOCK_FILE


def cache_lock() -> Path | None:
    """Where versions before issue 61 kept the machine lock, beside `$HYPERGRID_CACHE`: still read and written while
    the variable names a cache elsewhere (None with an explicit `$HYPERGRID_LOCK`)."""
    cache = os.environ.get("HYPERGRID_CACHE")
    if os.environ.get(LOCK_ENV) or not cache:
        return None
    path = Path(cache).expanduser() / LOCK_FILE
    return None if path == machine_lock() else path


def lock_files(ledger: Ledger, out_roots: Iterable[Path] = ()) -> list[Path]:
    """Every lock file this experiment can see: the machine's (and the one beside the cache, where older versions
    kept it), and each out_root's it touched (and `out_roots`)."""
    roots = dict.fromkeys([*ledger.out_roots(), *(Path(r).resolve() for r in out_roots)])
    beside_cache = cache_lock()
    return [machine_lock(), *([beside_cache] if beside_cache else []), *(Path(root) / STATE_DIR / LOCK_FILE for root in roots)]


def origin(ledger: Ledger) -> str | None:
    """The experiment's identity: the digest of its ledger chain's first entry (None before the chain starts)."""
    chain = ledger.reconciled().chain
    return chain[0]["hash"] if chain else None


def record_use(ledger: Ledger, kind: str, identities: Iterable[str], **data: Any) -> None:
    """Append a claim or a final to every lock file (the machine's must take it; an out_root that is gone is
    skipped)."""
    line = {"id": secrets.token_hex(8), "kind": kind, "at": now_iso(), "experiment": ledger.name,
            "origin": origin(ledger), "state": str(ledger.state), "out_root": str(ledger.out_root),
            "identities": sorted(set(identities)), **host_identity(), **data}
    append_to_copies(lock_files(ledger), [line])


def uses(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The union of the lock files' lines, each once (in the order first seen), with the file it was read from."""
    unique: dict[str, dict[str, Any]] = {}
    for path in paths:
        for line in read_lines(Path(path)):
            if "id" in line and isinstance(line.get("identities"), list):
                unique.setdefault(str(line["id"]), {**line, "file": str(path)})
    return list(unique.values())


def _overlap(mine: set[str], theirs: Iterable[str]) -> set[str]:
    theirs = set(theirs)
    return (mine & theirs) | {m for m in mine for t in theirs if contains(m, t) or contains(t, m)}


def locked_by_others(ledger: Ledger, identities: Iterable[str], out_roots: Iterable[Path] = ()) -> str | None:
    """Why these holdout texts cannot be claimed: a claim or a final on one of them by another body of evidence in
    any lock file this experiment can see; None when there is none."""
    late = behind(ledger)
    if late:
        return late
    mine, me = set(identities), origin(ledger)
    taken_over = superseded(ledger)
    for use in uses(lock_files(ledger, out_roots)):
        if use.get("experiment") == ledger.name and me is not None and use.get("origin") == me:
            continue  # this experiment's own claim: resumed, not repeated
        if use.get("experiment") == ledger.name and use.get("origin") in taken_over:
            continue  # its earlier ledger's, taken over by a recorded restart: a reuse, labelled as such
        shared = _overlap(mine, use.get("identities", []))
        if not shared:
            continue
        who = (f"this experiment's name under another ledger (origin {use.get('origin')}, state folder "
               f"{use.get('state')})" if use.get("experiment") == ledger.name else f"experiment {use.get('experiment')}")
        return (f"{who} {'claimed its final' if use.get('kind') == 'claim' else 'completed its final'} on "
                f"{len(shared)} of these texts on {use.get('at', '?')} (out_root {use.get('out_root')}; recorded in "
                f"{use['file']}): the holdout is spent per content, whatever the experiment, state folder or out_root. "
                "Give this experiment a fresh holdout manifest")
    return None


def behind(ledger: Ledger) -> str | None:
    """Why this ledger is behind what a lock records of its own origin (a claim or a completed final this copy does
    not hold: a working copy taken before the final, its original archived), naming the copy that is ahead; None when
    it holds everything the locks record of it. Such a ledger refuses to act (render.laws.evidence.check_ledger_held,
    the claim)."""
    from render.laws.ledger import Kind

    me = origin(ledger)
    if me is None:
        return None
    holds = {"claim": bool(ledger.entries(Kind.CLAIM)), "final": bool(ledger.entries(Kind.FINAL_RESULT))}
    for use in uses(lock_files(ledger)):
        kind = str(use.get("kind"))
        if use.get("experiment") != ledger.name or use.get("origin") != me or holds.get(kind, True):
            continue
        what = "the claim of its final" if kind == "claim" else "its completed final"
        return (f"experiment {ledger.name}: this copy of its ledger ({ledger.state_copy}) is behind the holdout lock: "
                f"{use['file']} records {what} on {use.get('at', '?')}, taken under this same ledger (origin {me}) "
                f"from state folder {use.get('state')} and out_root {use.get('out_root')}, and this copy does not hold "
                f"it. The copy there is ahead: run with $HYPERGRID_STATE={use.get('state')} and that out_root, or copy "
                f"its ledger.jsonl here; nothing was done")
    return None


ROOTS_FILE = "out-roots.jsonl"  # beside the machine lock: every output root a render on this machine launched into


def remember_root(out_root: Path) -> None:
    """Record an output root a render launched into (once), so a holdout previewed there, before or outside any
    experiment, is found by every final's contamination check (`known_roots`)."""
    path = machine_lock().with_name(ROOTS_FILE)
    root = str(Path(out_root).resolve())
    if any(line.get("root") == root for line in read_lines(path)):
        return
    append_to_copies([path], [{"id": secrets.token_hex(8), "root": root, "at": now_iso(), **host_identity()}])


def known_roots() -> list[Path]:
    """Every output root a render on this machine launched into (`remember_root`)."""
    return [Path(str(line["root"])) for line in read_lines(machine_lock().with_name(ROOTS_FILE)) if line.get("root")]
