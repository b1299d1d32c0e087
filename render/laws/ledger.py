"""One append-only, hash-chained ledger per experiment, kept in the user's state folder and in every out_root it used.

    <state>/experiments/<name>/ledger.jsonl        $HYPERGRID_STATE, default ~/.local/state/hypergrid
    <out_root>/experiments/<name>/ledger.jsonl     for every out_root the experiment launched from

Every law of the climb reads it: the holdout's reservation, the frozen anchor and decision rule with its
amendments, the budget's reservations, the final's claim, its token being spent and its result.

Each entry names its predecessor's digest (`prev`; the first names the experiment's genesis digest) and
carries its own (`hash`, over every other field), its experiment's name and, once the rule is frozen, the
frozen rule's digest (`bound`). Every copy is verified on read, from the genesis: a copy's chain ends at
the first entry that was altered, does not follow its predecessor, or belongs to another experiment or
rule. Copies are reconciled by the chain: the longest valid chain wins, and a copy that disagrees with it
(a fork, an altered or cut copy) is reported with both versions and rewritten from the chain when the
next launch syncs (its text kept beside it as `ledger.jsonl.replaced-<ns>`). Writers hold the user's state
folder's lock and the out_root's, so two users with different state folders sharing an out_root append
to one chain.

Older versions kept the same evidence unchained: ledger lines without a digest, registries
(`holdouts.jsonl`, `finals.jsonl`, `anchors.jsonl` under `<out_root>/.hypergrid` and the state folder)
and FINAL.json / ANCHOR.json. They are read as they were until the first write, which migrates them
once into the chain (a claim whose final has a result gets its token spent); after it, unchained lines
are reported and not read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from render.rundir.states import Name
from render.rundir import STATE_DIR, atomic_write_bytes, append_record, check_name, exclusive, now_iso, read_lines

log = logging.getLogger("render")


class Kind(Name):
    """A ledger entry's `kind`: what it records."""

    RULE = "rule"  # the frozen decision rule
    AMENDMENT = "amendment"  # a later version of the rule
    ANCHOR = "anchor"  # the frozen anchor cell
    HOLDOUT = "holdout"  # a reserved holdout split (by content)
    CLAIM = "claim"  # the final's claim of the holdout (a one-time token)
    FINAL_RESULT = "final-result"
    TOKEN_SPENT = "token-spent"
    RESERVATION = "reservation"  # budget held by a launch
    EXTEND = "extend"  # a reservation grown while its launch runs
    HOLD = "hold"  # a reservation kept alive by scheduler jobs
    RELEASE = "release"
    ADOPT = "adopt"  # runs of another state folder taken in: counted, never ranked
    OUT_ROOT = "out_root"  # an output root that holds a copy
    KEEP = "keep"  # what navigation leaves for the final: its current estimate with a margin (the climb, each generation)
    RESTART = "restart"  # an explicit restart over an earlier, lost ledger (render.laws.restart): its first entry


LEDGER = "ledger.jsonl"
EXPERIMENTS = "experiments"
# the registries and records of contract versions before the ledger (read only)
LEGACY_REGISTRIES = {"holdouts.jsonl": Kind.HOLDOUT, "finals.jsonl": Kind.CLAIM, "anchors.jsonl": Kind.ANCHOR}
LEGACY_FILES = {"FINAL.json": Kind.CLAIM, "ANCHOR.json": Kind.ANCHOR, "final-result.json": Kind.FINAL_RESULT}


def user_state_dir() -> Path:
    """The user's own copy of every ledger, across output roots and working folders (`$HYPERGRID_STATE`)."""
    env = os.environ.get("HYPERGRID_STATE")
    return Path(env).expanduser() if env else Path.home() / ".local" / "state" / "hypergrid"


def experiment_dir(out_root: Path, name: str) -> Path:
    """An experiment's folder under an output root: its ledger copy, generations, final result."""
    return Path(out_root) / EXPERIMENTS / check_name(name, "experiment.name")


def _legacy_id(kind: str, entry: dict[str, Any]) -> str:
    blob = json.dumps({k: v for k, v in entry.items() if k not in ("out_root", "record")}, sort_keys=True, default=str)
    return f"legacy-{kind}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def _legacy(name: str, folders: list[Path], experiment_dirs: list[Path]) -> list[dict[str, Any]]:
    entries = []
    for folder in folders:
        for file, kind in LEGACY_REGISTRIES.items():
            for entry in read_lines(folder / file):
                if entry.get("experiment") == name:
                    at = entry.get("registered_at") or entry.get("claimed_at") or entry.get("recorded_at") or ""
                    entries.append({**entry, "id": _legacy_id(kind, entry), "kind": kind, "at": at})
    for folder in experiment_dirs:
        for file, kind in LEGACY_FILES.items():
            try:
                entry = json.loads((folder / file).read_text())
            except (OSError, ValueError):
                continue
            # a file that names another experiment (a folder copied under a second name) is not this one's
            if isinstance(entry, dict) and "kind" not in entry and entry.get("experiment", name) == name:
                body = {"result": entry} if kind == Kind.FINAL_RESULT else entry
                at = entry.get("claimed_at") or entry.get("recorded_at") or ""
                entries.append({**body, "experiment": name, "id": _legacy_id(kind, body), "kind": kind, "at": at})
    return entries


_COPIES: dict[Path, tuple[tuple[int, int, int], list[dict[str, Any]]]] = {}  # path -> (file state, lines)


def _read_copy(path: Path) -> list[dict[str, Any]]:
    """One copy's lines, read again only when its inode, size or mtime changed (a 300-cell preflight reads each once)."""
    try:
        stat = path.stat()
    except OSError:
        return []
    key = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    cached = _COPIES.get(path)
    if cached is None or cached[0] != key:
        cached = (key, [e for e in read_lines(path) if "id" in e and "kind" in e])
        _COPIES[path] = cached
    return cached[1]


# -- the chain ----------------------------------------------------------------------------------


def genesis(name: str) -> str:
    """The predecessor of an experiment's first entry: its chain is bound to its name from the start."""
    return hashlib.sha256(f"hypergrid-ledger\0{name}".encode()).hexdigest()[:32]


def entry_digest(entry: dict[str, Any]) -> str:
    """The digest of an entry's content (every field but the digest itself, its predecessor's digest included)."""
    body = {k: v for k, v in entry.items() if k != "hash"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Verified:
    """One copy, verified: its valid chain (from the genesis), what broke it, and its unchained (old layout) lines."""

    path: Path
    chain: list[dict[str, Any]]
    problems: list[str]
    unchained: list[dict[str, Any]]


def verify_chain(name: str, lines: list[dict[str, Any]], path: Path) -> Verified:
    """Walk a copy from the genesis: each entry must name its predecessor's digest, match its own, belong to the
    experiment `name`, and (after the rule was frozen) carry the frozen rule's digest. The chain ends at the first
    entry that does not; what follows it is reported, not read."""
    chain: list[dict[str, Any]] = []
    unchained: list[dict[str, Any]] = []
    problems: list[str] = []
    prev, bound = genesis(name), None
    for number, entry in enumerate(lines, 1):
        if "hash" not in entry and "prev" not in entry:
            unchained.append(entry)  # the layout before the chain: migrated once, while no chain exists
            continue
        why = None
        if entry.get("experiment") != name:
            why = f"belongs to experiment {entry.get('experiment')!r}, not {name!r}"
        elif entry.get("prev") != prev:
            why = "does not follow the entry before it (its predecessor's digest differs)"
        elif entry_digest(entry) != entry.get("hash"):
            why = "was altered after it was written (its digest does not match its content)"
        elif bound is not None and entry.get("bound") != bound:
            why = f"is bound to decision rule {entry.get('bound')!r}, not this experiment's frozen {bound!r}"
        if why is not None:
            problems.append(f"{path}: entry {number} ({entry.get('kind')}, {entry.get('id')}) {why}; it and the "
                            f"{len(lines) - number} line(s) after it are not read")
            break
        chain.append(entry)
        prev = entry["hash"]
        if entry["kind"] == Kind.RULE and bound is None:
            bound = str(entry.get("digest"))
    if chain and unchained:
        problems.append(f"{path}: {len(unchained)} unchained line(s) next to the chain (the old layout is migrated "
                        "once, before the chain starts); not read")
    return Verified(path, chain, problems, unchained)


@dataclass
class Reconciled:
    """Every copy's verdict: the winning chain (the longest valid one), and each disagreement with both versions."""

    chain: list[dict[str, Any]]
    legacy: list[dict[str, Any]]
    problems: list[str]
    behind: list[Path]  # copies whose valid chain is a proper prefix of the winner, or that disagree with it

    @property
    def head(self) -> str | None:
        return self.chain[-1]["hash"] if self.chain else None


def reconcile(name: str, copies: list[Verified]) -> tuple[list[dict[str, Any]], list[str], list[Path]]:
    """The longest valid chain wins; a copy whose chain is not a prefix of the winner's is a fork, reported with
    the first entry where the two versions part."""
    winner = max(copies, key=lambda v: len(v.chain), default=None)
    if winner is None:
        return [], [], []
    chain = winner.chain
    digests = [e["hash"] for e in chain]
    problems: list[str] = []
    behind: list[Path] = []
    for copy in copies:
        mine = [e["hash"] for e in copy.chain]
        problems += copy.problems
        if mine == digests:
            if copy.problems:
                behind.append(copy.path)
            continue
        behind.append(copy.path)
        if digests[:len(mine)] != mine:
            at = next(i for i, (a, b) in enumerate(zip(mine, digests)) if a != b)
            problems.append(
                f"{copy.path}: disagrees with the longest valid chain ({winner.path}) from entry {at + 1}: this copy has "
                f"{json.dumps(copy.chain[at], sort_keys=True, default=str)}, the chain has "
                f"{json.dumps(chain[at], sort_keys=True, default=str)}; the longer chain is kept")
    return chain, problems, behind


_VERIFIED: dict[tuple[Path, str], tuple[Any, Verified]] = {}  # (path, experiment) -> (file state, verdict)


def _verify_copy(name: str, path: Path) -> Verified:
    """A copy verified once per state of its file (the lines are re-read only when the file changed)."""
    lines = _read_copy(path)
    state = _COPIES[path][0] if path in _COPIES and path.exists() else None
    cached = _VERIFIED.get((path, name))
    if cached is None or state is None or cached[0] != state:
        cached = (state, verify_chain(name, lines, path))
        _VERIFIED[(path, name)] = cached
    return cached[1]


_REPORTED: set[str] = set()
_HELD: dict[Path, int] = {}  # lock files this process holds, with their depth (the lock is reentrant)


class Ledger:
    """The experiment `name`'s ledger as seen from `out_root` (which becomes one of its copies)."""

    def __init__(self, name: str, out_root: Path | str) -> None:
        self.name = check_name(name, "experiment.name")
        self.out_root = Path(out_root).expanduser().resolve()
        self.state = user_state_dir()  # fixed for the ledger's life (an exit handler writes where the launch did)

    # -- where ---------------------------------------------------------------------------------

    @property
    def state_copy(self) -> Path:
        return self.state / EXPERIMENTS / self.name / LEDGER

    def out_roots(self, entries: list[dict[str, Any]] | None = None) -> list[Path]:
        """Every output root the experiment launched from (recorded in the ledger), this one first."""
        seen = [self.out_root]
        for entry in self._near().chain if entries is None else entries:
            if entry.get("kind") == Kind.OUT_ROOT and Path(entry["path"]) not in seen:
                seen.append(Path(entry["path"]))
        return seen

    def _copy(self, out_root: Path) -> Path:
        return experiment_dir(out_root, self.name) / LEDGER

    def copies(self, entries: list[dict[str, Any]] | None = None) -> list[Path]:
        return [self.state_copy, *(self._copy(r) for r in self.out_roots(entries))]

    # -- reading -------------------------------------------------------------------------------

    def _verified(self, paths: list[Path]) -> list[Verified]:
        return [_verify_copy(self.name, path) for path in paths]

    def _near(self) -> Reconciled:
        """The two copies every command can reach: the user's and this out_root's."""
        return self._reconcile([self.state_copy, self._copy(self.out_root)])

    def _reconcile(self, paths: list[Path]) -> Reconciled:
        copies = self._verified(paths)
        chain, problems, behind = reconcile(self.name, copies)
        return Reconciled(chain, [], problems, behind)

    def reconciled(self) -> Reconciled:
        """Every copy verified and reconciled; the old layout's entries (not yet migrated) kept apart."""
        near = self._near()
        paths = self.copies(near.chain)
        found = self._reconcile(paths)
        if not found.chain:  # no chain anywhere: the old layout, read as it was until its migration
            roots = self.out_roots(found.chain)
            unchained = [e for v in self._verified(paths) for e in v.unchained]
            unchained += _legacy(self.name, [r / STATE_DIR for r in roots] + [self.state],
                                 [experiment_dir(r, self.name) for r in roots])
            unique: dict[str, dict[str, Any]] = {}
            for entry in unchained:
                if entry.get("experiment", self.name) == self.name:
                    unique.setdefault(str(entry["id"]), entry)
            found.legacy = sorted(unique.values(),
                                  key=lambda e: (int(e.get("t") or 0), str(e.get("at", "")), str(e["id"])))
        for problem in found.problems:
            if problem not in _REPORTED:
                _REPORTED.add(problem)
                log.warning("experiment %s: ledger copy %s", self.name, problem)
        return found

    def problems(self) -> list[str]:
        """What verification and reconciliation found wrong with the copies (each reported once per process)."""
        return self.reconciled().problems

    def entries(self, kind: Kind | None = None) -> list[dict[str, Any]]:
        """The verified chain (the longest valid one across the copies), oldest first; before its migration, the
        old layout's entries (unchained ledger lines, registries, FINAL.json / ANCHOR.json) as they were."""
        found = self.reconciled()
        ordered = found.legacy + found.chain
        return [e for e in ordered if kind is None or e["kind"] == kind]

    def latest(self, kind: Kind) -> dict[str, Any] | None:
        found = self.entries(kind)
        return found[-1] if found else None

    def first(self, kind: Kind) -> dict[str, Any] | None:
        found = self.entries(kind)
        return found[0] if found else None

    # -- writing -------------------------------------------------------------------------------

    def _chained(self, chain: list[dict[str, Any]], kind: Kind, data: dict[str, Any]) -> dict[str, Any]:
        rule = next((e for e in chain if e["kind"] == Kind.RULE), None)
        entry = {"id": secrets.token_hex(8), "kind": kind, "at": now_iso(), "t": time.time_ns(),
                 **data, "experiment": self.name, "prev": chain[-1]["hash"] if chain else genesis(self.name)}
        if rule is not None:
            entry["bound"] = str(rule.get("digest"))
        entry["hash"] = entry_digest(entry)
        return entry

    def _write(self, chain: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
        """Append `new` to every copy: a copy at the chain's head takes the lines; any other (behind, forked,
        altered, missing) is rewritten whole (atomically) as the chain, its old text kept beside it."""
        for i, path in enumerate(self.copies(chain + new)):
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                text = read_lines(path)
                verified = verify_chain(self.name, text, path)
                clean = len(verified.chain) == len(text)  # nothing altered, foreign or unchained in it
                have = [e["hash"] for e in verified.chain] if clean else None
                if have == [e["hash"] for e in chain] and new:
                    for entry in new:
                        append_record(path, entry)
                elif have != [e["hash"] for e in chain + new]:
                    if path.exists() and path.stat().st_size:
                        kept = path.with_name(f"{LEDGER}.replaced-{time.time_ns()}")
                        kept.write_bytes(path.read_bytes())
                        log.warning("experiment %s: ledger copy %s rewritten from the verified chain (its text is "
                                    "kept in %s)", self.name, path, kept.name)
                    atomic_write_bytes(path, "".join(json.dumps(e, default=str) + "\n" for e in chain + new).encode())
            except OSError as error:
                if i < 2:  # the user's copy and this out_root's
                    raise
                log.warning("experiment %s: ledger copy %s not written (%s)", self.name, path, error)

    def _migrate(self, found: Reconciled) -> list[dict[str, Any]]:
        """The old layout, once: its entries become the chain's first entries (`migrated` names what they were),
        a claim whose final has a result has its token spent; then the old files are no longer read."""
        if found.chain or not found.legacy:
            return found.chain
        chain: list[dict[str, Any]] = []
        tokens = {e.get("token") for e in found.legacy if e["kind"] == Kind.TOKEN_SPENT}
        results = [e for e in found.legacy if e["kind"] == Kind.FINAL_RESULT]
        for old in found.legacy:
            data = {k: v for k, v in old.items() if k not in ("id", "kind", "experiment", "prev", "hash", "bound")}
            chain.append(self._chained(chain, old["kind"], {**data, "migrated": old["id"]}))
        for claim in (e for e in found.legacy if e["kind"] == Kind.CLAIM):
            if results and claim.get("token") not in tokens:
                chain.append(self._chained(chain, Kind.TOKEN_SPENT, {"token": claim.get("token"), "migrated": "spent"}))
        log.info("experiment %s: %d entries of the old layout migrated into its ledger's chain", self.name, len(chain))
        return chain

    def append(self, kind: Kind, **data: Any) -> dict[str, Any]:
        """Record an entry at the head of the verified chain, in every copy (under the lock). The state folder's
        copy and this out_root's must take it; an out_root that is gone is skipped with a warning."""
        with self.lock():
            found = self.reconciled()
            chain = self._migrate(found)
            entry = self._chained(chain, kind, data)
            self._write(chain, [entry])
            return entry

    def sync(self) -> None:
        """Verify and reconcile the copies: migrate the old layout once, record this out_root once, and rewrite
        every copy that is not the verified chain."""
        with self.lock():
            found = self.reconciled()
            chain = self._migrate(found)
            new = []
            if not any(e["kind"] == Kind.OUT_ROOT and Path(e["path"]) == self.out_root for e in chain):
                new.append(self._chained(chain, Kind.OUT_ROOT, {"path": str(self.out_root)}))
            self._write(chain, new)

    def _lock_files(self) -> list[Path]:
        return [self.state_copy.parent / ".lock", experiment_dir(self.out_root, self.name) / ".lock"]

    @contextmanager
    def lock(self) -> Iterator[None]:
        """One writer at a time across processes, out_roots and state folders: the user's state folder and this
        out_root each hold a lock, taken in that order (reentrant within a process)."""
        with ExitStack() as stack:
            for path in self._lock_files():
                if _HELD.get(path):
                    _HELD[path] += 1
                    stack.callback(_release_depth, path)
                    continue
                stack.enter_context(exclusive(path, wait=True))
                _HELD[path] = 1
                stack.callback(_release_depth, path)
            yield


def _release_depth(path: Path) -> None:
    _HELD[path] -= 1
    if not _HELD[path]:
        del _HELD[path]


def ledger_stamp(ledger: Ledger) -> dict[str, Any]:
    """What evidence records of the ledger in force when it was gathered: the experiment's identity (its name and
    the digest of its chain's first entry, `origin`) and the chain's head. Empty before the chain starts."""
    chain = ledger.reconciled().chain
    if not chain:
        return {}
    return {"experiment": ledger.name, "origin": chain[0]["hash"], "head": chain[-1]["hash"]}


def all_ledgers(out_root: Path) -> list[Ledger]:
    """Every experiment with a ledger in the user's state folder or under `out_root` (or older registries)."""
    names: set[str] = set()
    for base in (user_state_dir() / EXPERIMENTS, Path(out_root) / EXPERIMENTS):
        names |= {p.parent.name for p in base.glob(f"*/{LEDGER}")}
        names |= {p.parent.name for p in base.glob("*/FINAL.json")}
    for folder in (Path(out_root) / STATE_DIR, user_state_dir()):
        for file in LEGACY_REGISTRIES:
            names |= {str(e["experiment"]) for e in read_lines(folder / file) if e.get("experiment")}
    ledgers = []
    for name in sorted(names):
        try:
            ledgers.append(Ledger(name, out_root))
        except ValueError:
            continue
    return ledgers


def superseded(ledger: Ledger) -> set[str]:
    """The ledger heads and origins this ledger's explicit restart took over (render.laws.restart): their evidence is
    another body's, by a recorded command."""
    return {str(h) for entry in ledger.entries(Kind.RESTART) for h in entry.get("supersedes", [])}
