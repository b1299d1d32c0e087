"""Evidence beyond the ledger: the run directories that name an experiment (under each of its out_roots and every
folder registered there, and, for the climb, every run the index knows) are read beside its ledger, and a run the
ledger cannot account for is refused or adopted by a recorded entry, never silently mixed.

A run names its experiment in its run.json (`config.experiment.name`). Two kinds of run cannot be accounted for:

- any run, when no copy of the ledger has the experiment's frozen rule (every copy deleted mid-climb, or the
  experiment launched from a state folder whose copies this one cannot see): a launch is refused before anything
  is written, since its rule, anchor and holdout cannot be checked against the first launch's;
- a *stranger*: a run compared with another anchor than the one frozen in the ledger (rendered from another
  `$HYPERGRID_STATE` folder, whose ledger froze another anchor, e.g. `dtype=bfloat16`; or by hand, or by a version
  before the ledger). Its deltas are against another reference, so it is never ranked; it is refused (the launch,
  the climb, the final) until a user adopts it (`assess climb <name> --adopt "<why>"`): an `adopt` entry names each
  run by path and cell key, and from then on it is listed as adopted, counted in the budget and not ranked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from render.laws.anchor import ExperimentGuard, frozen_anchor
from render.laws.ledger import Kind, Ledger


@dataclass(frozen=True)
class Stranger:
    """A run that names the experiment and compares with another anchor than the frozen one."""

    path: str
    cell_key: str
    anchor_key: str
    why: str  # the anchor's differing keys, e.g. `model.dtype: "float32" -> "bfloat16"`

    def as_entry(self) -> dict[str, str]:
        return {"path": self.path, "cell_key": self.cell_key, "anchor_key": self.anchor_key}


def runs_naming(ledger: Ledger, history: Any) -> list[Any]:
    """The runs of `history` whose run.json names the experiment."""
    return [run for run in history.runs if run.experiment and run.experiment.name == ledger.name]


def _anchor_cell(path: str) -> dict[str, Any]:
    from render.rundir import InvalidRunDirectory, read_run_record

    try:
        return dict(read_run_record(path).anchor.cell or {})
    except (OSError, InvalidRunDirectory):
        return {}


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(node, dict):
        return {prefix.rstrip("."): node}
    return {k: v for key, value in node.items() for k, v in _flat(value, f"{prefix}{key}.").items()}


def _why(recorded: dict[str, Any], anchor_key: str, path: str) -> str:
    frozen, theirs = _flat(recorded.get("cell") or {}), _flat(_anchor_cell(path))
    changed = [f"{k}: {json.dumps(frozen.get(k))} -> {json.dumps(theirs.get(k))}"
               for k in sorted(set(frozen) | set(theirs)) if frozen.get(k) != theirs.get(k)]
    detail = "; ".join(changed) if theirs and changed else f"anchor cell key {anchor_key}"
    return f"its anchor is not the frozen one {recorded['cell_key']} ({detail})"


def _resolved(path: Any) -> str:
    return str(Path(str(path)).resolve())


def adopted(ledger: Ledger) -> dict[tuple[str, str], dict[str, Any]]:
    """(path, cell key) -> the `adopt` entry that took the run in."""
    return {(_resolved(run["path"]), str(run["cell_key"])): entry
            for entry in ledger.entries(Kind.ADOPT) for run in entry.get("runs", [])}


def strangers(ledger: Ledger, runs: Iterable[tuple[str, str, str]], *, include_adopted: bool = False
              ) -> list[Stranger]:
    """Of `runs` (path, cell key, anchor cell key) that name the experiment, those compared with another anchor than
    its ledger's frozen one, and not adopted (all of them with `include_adopted`). None before an anchor is frozen."""
    recorded = frozen_anchor(ledger)
    if recorded is None:
        return []
    taken = {} if include_adopted else adopted(ledger)
    return [Stranger(_resolved(path), cell_key, anchor_key, _why(recorded, anchor_key, path))
            for path, cell_key, anchor_key in runs
            if anchor_key != recorded["cell_key"] and (_resolved(path), str(cell_key)) not in taken]


def strangers_message(ledger: Ledger, found: list[Stranger]) -> str:
    first = found[0]
    return (f"experiment {ledger.name}: {len(found)} run(s) name it but compare with another anchor than the one frozen "
            f"in its ledger (e.g. {first.path}: {first.why}): rendered from another $HYPERGRID_STATE folder, by hand or by "
            "a version before the ledger. They cannot be ranked against this experiment's anchor and are not in its "
            "ledger. Adopt them (counted in the budget, listed, never ranked): "
            f"assess climb {ledger.name} --adopt \"<why>\"; or move them out of the output root and the index "
            "(assess score --rebuild)")


def adopt(ledger: Ledger, found: list[Stranger], reason: str) -> dict[str, Any] | None:
    """Record the adoption of `found` with its reason (None when there is nothing to adopt)."""
    if not found:
        return None
    if not reason.strip():
        raise ExperimentGuard(f"experiment {ledger.name}: an adoption needs its reason: --adopt \"<why>\"")
    with ledger.lock():
        return ledger.append(Kind.ADOPT, runs=[s.as_entry() for s in found], reason=reason)


def check_evidence(ledger: Ledger, history: Any) -> None:
    """Refuse a launch when runs name the experiment but its ledger has no frozen rule in any copy, or when runs
    compare with another anchor than its frozen one and were not adopted."""
    runs = runs_naming(ledger, history)
    if not runs:
        return
    if ledger.first(Kind.RULE) is None:
        copies = ", ".join(str(p) for p in ledger.copies())
        raise ExperimentGuard(
            f"experiment {ledger.name}: {len(runs)} run(s) name it (e.g. {runs[0].path}), but no copy of its ledger has "
            f"its frozen rule ({copies}): the copies were deleted, or it was launched with another $HYPERGRID_STATE "
            "and another out_root. Its rule, anchor and holdout cannot be checked; nothing was launched. Restore a copy "
            "(a `ledger.jsonl.replaced-*` beside it, a backup), run with the state folder that launched it, or give "
            "this climb a new experiment.name")
    found = strangers(ledger, [(str(r.path), r.cell_key, r.anchor_cell_key) for r in runs])
    if found:
        raise ExperimentGuard(strangers_message(ledger, found) + "; nothing was launched")
