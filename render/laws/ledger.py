"""One append-only ledger per experiment, kept in the user's state folder and in every out_root it used.

    <state>/experiments/<name>/ledger.jsonl        $HYPERGRID_STATE, default ~/.local/state/hypergrid
    <out_root>/experiments/<name>/ledger.jsonl     for every out_root the experiment launched from

Every law of the climb reads it: the holdout's reservation, the frozen anchor and decision rule with its
amendments, the budget's reservations, the final's claim, its token being spent and its result. An
entry has an id; the ledger is the union of its copies (deleting one copy, or working from another
folder, changes nothing), and `sync` writes into each copy what it lacks, on every launch.

Older versions kept the same evidence in registries (`holdouts.jsonl`, `finals.jsonl`, `anchors.jsonl`
under `<out_root>/.hypergrid` and the state folder) and in FINAL.json / ANCHOR.json: they are read
as ledger entries too, so an upgrade loses no reservation and no claim.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from render.rundir import STATE_DIR, append_record, check_name, exclusive, now_iso, read_lines

log = logging.getLogger("render")

LEDGER = "ledger.jsonl"
EXPERIMENTS = "experiments"
# the registries and records of contract versions before the ledger (read only)
LEGACY_REGISTRIES = {"holdouts.jsonl": "holdout", "finals.jsonl": "claim", "anchors.jsonl": "anchor"}
LEGACY_FILES = {"FINAL.json": "claim", "ANCHOR.json": "anchor", "final-result.json": "final-result"}


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
            if isinstance(entry, dict) and "kind" not in entry:
                body = {"result": entry} if kind == "final-result" else entry
                at = entry.get("claimed_at") or entry.get("recorded_at") or ""
                entries.append({**body, "experiment": name, "id": _legacy_id(kind, body), "kind": kind, "at": at})
    return entries


class Ledger:
    """The experiment `name`'s ledger as seen from `out_root` (which becomes one of its copies)."""

    def __init__(self, name: str, out_root: Path | str) -> None:
        self.name = check_name(name, "experiment.name")
        self.out_root = Path(out_root).expanduser().resolve()

    # -- where ---------------------------------------------------------------------------------

    @property
    def state_copy(self) -> Path:
        return user_state_dir() / EXPERIMENTS / self.name / LEDGER

    def out_roots(self, entries: list[dict[str, Any]] | None = None) -> list[Path]:
        """Every output root the experiment launched from (recorded in the ledger), this one first."""
        seen = [self.out_root]
        for entry in self._read_copies([self.state_copy, self._copy(self.out_root)]) if entries is None else entries:
            if entry.get("kind") == "out_root" and Path(entry["path"]) not in seen:
                seen.append(Path(entry["path"]))
        return seen

    def _copy(self, out_root: Path) -> Path:
        return experiment_dir(out_root, self.name) / LEDGER

    def copies(self, entries: list[dict[str, Any]] | None = None) -> list[Path]:
        return [self.state_copy, *(self._copy(r) for r in self.out_roots(entries))]

    # -- reading -------------------------------------------------------------------------------

    @staticmethod
    def _read_copies(paths: list[Path]) -> list[dict[str, Any]]:
        return [e for path in paths for e in read_lines(path) if "id" in e and "kind" in e]

    def entries(self, kind: str | None = None) -> list[dict[str, Any]]:
        """The union of every copy (and of the older registries), each entry once, oldest first."""
        first = self._read_copies([self.state_copy, self._copy(self.out_root)])
        roots = self.out_roots(first)
        found = first + self._read_copies([self._copy(r) for r in roots[1:]])
        found += _legacy(self.name, [r / STATE_DIR for r in roots] + [user_state_dir()],
                         [experiment_dir(r, self.name) for r in roots])
        unique: dict[str, dict[str, Any]] = {}
        for entry in found:
            unique.setdefault(entry["id"], entry)
        # `t` (ns) orders entries of one second; the older registries' entries (no `t`) come first
        ordered = sorted(unique.values(), key=lambda e: (int(e.get("t") or 0), str(e.get("at", "")), e["id"]))
        return [e for e in ordered if kind is None or e["kind"] == kind]

    def latest(self, kind: str) -> dict[str, Any] | None:
        found = self.entries(kind)
        return found[-1] if found else None

    def first(self, kind: str) -> dict[str, Any] | None:
        found = self.entries(kind)
        return found[0] if found else None

    # -- writing -------------------------------------------------------------------------------

    def append(self, kind: str, **data: Any) -> dict[str, Any]:
        """Record an entry in every copy. The state folder's copy must take it; an out_root that is gone is
        skipped with a warning (the next launch there heals it)."""
        entry = {"id": secrets.token_hex(8), "kind": kind, "at": now_iso(), "t": time.time_ns(), "experiment": self.name,
                 **data}
        for i, path in enumerate(self.copies()):
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                append_record(path, entry)
            except OSError as error:
                if i < 2:  # the user's copy and this out_root's
                    raise
                log.warning("experiment %s: ledger copy %s not written (%s)", self.name, path, error)
        return entry

    def sync(self) -> None:
        """Cross-check the copies: record this out_root once, and write into each copy the entries it lacks."""
        entries = self.entries()
        if not any(e["kind"] == "out_root" and Path(e["path"]) == self.out_root for e in entries):
            entries.append(self.append("out_root", path=str(self.out_root)))
        for path in self.copies(entries):
            have = {e["id"] for e in self._read_copies([path])}
            missing = [e for e in entries if e["id"] not in have and not e["id"].startswith("legacy-")]
            if not missing:
                continue
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                for entry in missing:
                    append_record(path, entry)
            except OSError as error:
                log.warning("experiment %s: ledger copy %s could not be healed (%s)", self.name, path, error)

    @contextmanager
    def lock(self) -> Iterator[None]:
        """One writer at a time across processes and out_roots (the user's state folder holds the lock)."""
        with exclusive(self.state_copy.parent / ".lock", wait=True):
            yield


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
