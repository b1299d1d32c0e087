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
from render.laws.ledger import LEDGER, Kind, Ledger, experiment_dir, superseded
from render.rundir import experiment_of


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


def check_evidence(ledger: Ledger, history: Any, rule: dict[str, Any] | None = None) -> None:
    """Refuse a launch when runs name the experiment but its ledger has no frozen rule in any copy, when its other
    evidence shows a ledger this one is not (check_ledger_held), or when runs compare with another anchor than its
    frozen one and were not adopted."""
    runs = runs_naming(ledger, history)
    if runs and ledger.first(Kind.RULE) is None:
        copies = ", ".join(str(p) for p in ledger.copies())
        raise ExperimentGuard(
            f"experiment {ledger.name}: {len(runs)} run(s) name it (e.g. {runs[0].path}), but no copy of its ledger has "
            f"its frozen rule ({copies}): the copies were deleted, or it was launched with another $HYPERGRID_STATE "
            "and another out_root. Its rule, anchor and holdout cannot be checked; nothing was launched. Restore a copy "
            "(a `ledger.jsonl.replaced-*` beside it, a backup), run with the state folder that launched it, or give "
            "this climb a new experiment.name")
    check_ledger_held(ledger, traces(ledger, [(str(r.path), r.run) for r in runs]), rule)
    found = strangers(ledger, [(str(r.path), r.cell_key, r.anchor_cell_key) for r in runs])
    if found:
        raise ExperimentGuard(strangers_message(ledger, found) + "; nothing was launched")


# -- the ledger's existence is itself evidence ---------------------------------------------------------

GENERATIONS = "generations"
RESULT = "final-result.json"
QUALITY_KEYS = ("metric", "band", "alpha", "test")  # what a verdict is decided by: changed only by an amendment


@dataclass(frozen=True)
class Trace:
    """Something the experiment left outside its ledger: where it is, what it is, the ledger head it names (a
    chain entry's digest; None when it names none) and the quality rule it was gathered under (when it says)."""

    path: str
    what: str
    head: str | None = None
    quality: dict[str, Any] | None = None
    proves_ledger: bool = True  # only written while a ledger existed (a spend line, a copy, a result, a head)


def _quality_of(node: Any) -> dict[str, Any] | None:
    if not isinstance(node, dict) or node.get("band") is None:
        return None
    return {k: node[k] for k in QUALITY_KEYS if node.get(k) is not None}


def traces(ledger: Ledger, runs: Iterable[tuple[str, Any]] = ()) -> list[Trace]:
    """What the experiment has left in every place its ledger knows (and the user's state folder): generation
    records, spend logs, replaced ledger copies, its final's result, its lines in the holdout lock, and `runs`
    ((path, run.json record) naming it) with the ledger head each records and the quality rule its config was
    composed with."""
    from render.laws.spend import SPEND
    from render.rundir import read_lines

    found: list[Trace] = []
    folders = [ledger.state_copy.parent, *(experiment_dir(root, ledger.name) for root in ledger.out_roots())]
    for folder in dict.fromkeys(folders):
        for path in sorted((folder / GENERATIONS).glob("g[0-9][0-9][0-9][0-9].json")):
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            stamp = record.get("ledger") or {}
            # its rule is evidence once it decided on something (a generation before any score decided nothing)
            decided = any("verdict" in cell for cell in record.get("cells") or [])
            quality = _quality_of((record.get("rule") or {}).get("quality")) if decided else None
            found.append(Trace(str(path), f"generation {record.get('generation')}", stamp.get("head"), quality,
                               bool(stamp.get("head"))))
        found += [Trace(str(p), "a replaced copy of its ledger") for p in sorted(folder.glob(f"{LEDGER}.replaced-*"))]
        if (folder / RESULT).is_file():
            found.append(Trace(str(folder / RESULT), "its final's result"))
        spent = read_lines(folder / SPEND)
        if spent:
            found.append(_spend_trace(folder / SPEND, spent))
    from render.laws.lock import lock_files, uses

    for use in uses(lock_files(ledger)):
        if use.get("experiment") == ledger.name and use.get("origin"):
            found.append(Trace(str(use["file"]), f"its final's {use.get('kind')} in the holdout lock", use["origin"]))
    for where, record in runs:
        stamp = record.ledger or {}
        experiment = experiment_of(record)
        node = experiment.node if experiment is not None else {}
        found.append(Trace(str(where), "a run", stamp.get("head"), _quality_of(node.get("quality")),
                           bool(stamp.get("head"))))
    return found


def _spend_trace(path: Path, lines: list[dict[str, Any]]) -> Trace:
    """A spend log proves a ledger existed only by a line written under one (naming its head): a first launch that was
    measured and refused before its chain began (render.laws.spend.launch_stamp) leaves lines that name none, and a
    refusal leaves the experiment as it found it. Their device time is spent all the same (the log is read whole)."""
    if any((line.get("ledger") or {}).get("head") for line in lines):
        return Trace(str(path), f"its spend log ({len(lines)} line(s))")
    return Trace(str(path), f"its spend log ({len(lines)} line(s), written before any ledger: a refused first launch)",
                 proves_ledger=False)


def run_records(ledger: Ledger, paths: Iterable[Path | str] | None = None) -> list[tuple[str, Any]]:
    """(path, run.json record) of the runs naming the experiment: at `paths`, else under every out_root its ledger
    knows (and the folders registered there). Only run.json is read: no sample."""
    from render.rundir import InvalidRunDirectory, known_run_dirs, read_run_record

    folders = list(paths) if paths is not None else \
        [f for root in ledger.out_roots() if Path(root).is_dir() for f in known_run_dirs(Path(root))]
    found = []
    for folder in dict.fromkeys(Path(f) for f in folders):
        try:
            record = read_run_record(folder)
        except (OSError, InvalidRunDirectory):
            continue
        experiment = experiment_of(record)
        if experiment is not None and experiment.name == ledger.name:
            found.append((str(folder), record))
    return found


def restore_hint(ledger: Ledger, found: list[Trace]) -> str:
    """How to get the ledger back: a replaced copy beside it, a backup, the state folder that launched it."""
    kept = [t.path for t in found if t.what == "a replaced copy of its ledger"]
    where = " or ".join(str(p) for p in ledger.copies()[:2])
    first = (f"copy {kept[-1]} back to {ledger.state_copy}" if kept
             else f"restore {ledger.state_copy.name} from a backup to {where}")
    return (f"{first}; or run with the $HYPERGRID_STATE and out_root that launched it; or give a new climb a new "
            f"experiment.name (its evidence is not this one's); or start it over on purpose, recorded as such: "
            f"assess climb {ledger.name} --restart \"<why>\"")


def check_ledger_held(ledger: Ledger, found: list[Trace], rule: dict[str, Any] | None = None) -> None:
    """Refuse (ExperimentGuard) when the experiment's evidence shows a ledger this one is not: a missing ledger
    (no frozen rule) where evidence written under a ledger exists, a fresh or foreign one (evidence naming a head
    that is not in this chain), or a quality rule (metric, band, alpha, test) that differs from the one evidence
    was gathered under and is no version the ledger holds. `rule`: the composed rule, when nothing is frozen."""
    from render.laws.rule import recorded_rules

    from render.laws.lock import behind

    chain = ledger.reconciled().chain
    versions = recorded_rules(ledger)
    late = behind(ledger)
    if late:
        raise ExperimentGuard(late)
    if not ledger.entries() and any(t.proves_ledger for t in found):  # (a chain without a rule yet is a ledger)
        proof = next(t for t in found if t.proves_ledger)
        raise ExperimentGuard(
            f"experiment {ledger.name}: no copy of its ledger is left ({', '.join(map(str, ledger.copies()))}), "
            f"but it has left evidence that one existed: {len(found)} trace(s), e.g. {proof.what} at {proof.path}. A "
            f"lost ledger is not restarted (its rule, anchor, holdout, budget and final would start over); nothing was "
            f"done. Restore it: {restore_hint(ledger, found)}")
    heads = {e["hash"] for e in chain}
    taken_over = superseded(ledger)  # an explicit restart's earlier ledger: another body of evidence, by a command
    # a run under an unknown head is kept apart by the climb (assess.climb.observe), not a refusal
    foreign = [t for t in found if t.head and chain and t.head not in heads and t.head not in taken_over
               and t.what != "a run"]
    if foreign:
        first = foreign[0]
        raise ExperimentGuard(
            f"experiment {ledger.name}: {len(foreign)} piece(s) of its evidence were gathered under a ledger head this "
            f"ledger never had (e.g. {first.what} at {first.path}: head {first.head}): this ledger is fresh or another "
            f"one (another $HYPERGRID_STATE, a deleted and restarted copy). Nothing was done. Restore the ledger they "
            f"were gathered under: {restore_hint(ledger, found)}")
    allowed = [_quality_of(v.get("quality")) for v in versions] or ([_quality_of(rule.get("quality"))] if rule else [])
    for trace in found:
        if trace.quality is None or not allowed or (trace.head and chain and trace.head not in heads):
            continue  # (a run under another ledger is kept apart, whatever its rule)
        if not any(_same_quality(trace.quality, q or {}) for q in allowed):
            mine = allowed[-1] or {}
            changes = "; ".join(f"quality.{k}: {json.dumps(trace.quality.get(k))} -> {json.dumps(mine.get(k))}"
                                for k in QUALITY_KEYS if k in trace.quality and trace.quality.get(k) != mine.get(k))
            how = ("restore the ledger it was gathered under (this one never held its rule): "
                   + restore_hint(ledger, found) + "; or, if it is not this experiment's, move it out of the out_root")
            raise ExperimentGuard(
                f"experiment {ledger.name}: {trace.what} at {trace.path} was gathered under another quality rule than "
                f"this one ({changes}), and no version of the rule in its ledger is that one. A band, test or metric "
                f"changes only by a recorded amendment; nothing was done. Restore the experiment's config, or {how}")


def _same_quality(theirs: dict[str, Any], mine: dict[str, Any]) -> bool:
    """Whether evidence's quality rule is `mine` on every key it states (a config that leaves `test` unset runs
    under the rule in force's)."""
    return all(_equal(theirs[k], mine.get(k, "equivalence" if k == "test" else None)) for k in theirs)


def _equal(a: Any, b: Any) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


# -- whose evidence a run or a sample is ---------------------------------------------------------


@dataclass(frozen=True)
class Gathered:
    """What decides whether a run or a sample is the experiment's evidence: the heads its ledger's chain has had,
    and when the chain began. A run's run.json (render.run.runner.run_record) and each sample record name the head in
    force at their launch; a sample record that names none inherits its run's."""

    heads: frozenset[str]
    began: str | None  # the chain's first entry (ISO time); None: no chain yet, so nothing to tell apart

    @classmethod
    def of(cls, ledger: Ledger) -> Gathered:
        chain = ledger.reconciled().chain
        began = chain[0].get("at") if chain else None
        return cls(frozenset(e["hash"] for e in chain), str(began) if began else None)

    def why_apart(self, stamp: dict[str, Any] | None, started_at: str | None) -> str | None:
        """None when evidence stamped `stamp` and launched at `started_at` was gathered under this ledger, else why
        it is another body of evidence: a head this chain never had (another state folder, another rule, a restarted
        ledger), or no head at all though launched after the chain began (a renderer that did not name it: by hand,
        or from a state folder whose version did not). A run launched before the chain began and naming no head (an
        older version's) is taken on its anchor, as before."""
        if not self.heads:
            return None
        stamp = stamp or {}
        if head := stamp.get("head"):
            return None if head in self.heads else f"gathered under another ledger (origin {stamp.get('origin')}, head {head})"
        if self.began is None or _before(started_at, self.began):
            return None
        return f"names no ledger head though launched ({started_at or 'at an unknown time'}) after its ledger began ({self.began})"

    def takes(self, run: Any, record: Any = None, *, spend: bool = False) -> bool:
        """Whether a run (a RunRecord) or one of its sample records was gathered under this ledger; for `spend`,
        whether it is not another ledger's (a known foreign head): what no head proves apart, the budget still
        counts (its own log never did)."""
        stamp = (getattr(record, "ledger", None) or run.ledger) if record is not None else run.ledger
        if spend:
            head = (stamp or {}).get("head")
            return not (self.heads and head and head not in self.heads)
        return self.why_apart(stamp, run.started_at) is None


def _before(started_at: str | None, began: str) -> bool:
    from datetime import datetime

    if not started_at:
        return False
    try:
        return datetime.fromisoformat(started_at) < datetime.fromisoformat(began)
    except (TypeError, ValueError):
        return False


def held_samples(gathered: Gathered, name: str, runs: Iterable[Any], *, spend: bool = False
                 ) -> set[tuple[str, str, int]]:
    """The samples (cell key, text identity, seed) that runs naming the experiment hold, rendered or linked, under
    its ledger (Gathered.takes): its evidence, whoever first rendered them."""
    held: set[tuple[str, str, int]] = set()
    for run in runs:
        if run.experiment is not None and run.experiment.name == name:
            held |= {record.identity for record in run.samples if gathered.takes(run.run, record, spend=spend)}
    return held
