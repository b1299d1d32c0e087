"""`assess retime <sweep|run ...>`: time the cells of finished runs side by side and index the result.

Each contender is rebuilt from its run directory (its recorded overrides composed again; a cell whose key no longer
matches what was recorded is refused: it would time something else than what was judged), timed with every other
contender of its set by render.timing.sessions, and the session is recorded in the run directories and the index. The
speed-ups are assess.statistics.side_by_side's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assess.errors import AssessError, Refused
from assess.statistics.side_by_side import PairTiming, session_pairs
from render.rundir import RunDir, cell_label, load_runs
from render.rundir.session_log import TimingSession

Log = Callable[[str], None]
DEFAULT_ROUNDS = 20


class RetimeRefused(AssessError):
    """Nothing can be timed side by side as asked."""


def session_sets(pairs: Sequence[tuple[str, str]], wide: set[str], pairwise: bool, log: Log | None
                 ) -> list[list[str]]:
    """The cells each session loads: all at once, or one pair at a time (pairwise, or when more than one parallel
    cell is among them: a process leads one parallel cell's ranks at a time, render.timing.sessions). A pair of two parallel
    cells cannot share a session: it is left out, and said."""
    cells = sorted({k for pair in pairs for k in pair})
    if not pairwise and len(wide & set(cells)) <= 1:
        return [cells]
    sets = []
    for pair in pairs:
        if len(wide & set(pair)) > 1:
            if log:
                log(f"not timing {pair[0][:12]} against {pair[1][:12]} side by side: both are parallel cells, and a "
                    "session leads one parallel cell's ranks; each is timed against the width-1 cells")
            continue
        sets.append(list(pair))
    return sets


@dataclass
class RetimeResult:
    sessions: list[TimingSession] = field(default_factory=list)
    pairs: list[PairTiming] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # cell key -> its description

    def as_json(self) -> list[dict[str, Any]]:
        return [{**p.as_dict(), "cell_label": self.labels.get(p.cell), "against_label": self.labels.get(p.against)}
                for p in self.pairs]

    def lines(self) -> list[str]:
        out = []
        for p in self.pairs:
            s = p.speedup
            interval = f" [{s.low:.3g}, {s.high:.3g}]" if s.low is not None and s.high is not None else ""
            check = {True: "", False: "  (an output differs from its judged image)", None: "  (outputs not checked)"}
            out.append(f"{self.labels.get(p.cell, p.cell[:12])}  vs  {self.labels.get(p.against, p.against[:12])}: "
                       f"{s.value:.3g}x{interval} over {s.n} rounds on {p.device}{check[p.verified]}")
        return out


def _job(run: RunDir, device: str | None) -> Any:
    """The run's cell rebuilt by composing its recorded overrides again (the device replaced when asked)."""
    from assess.experiment import compose
    from render.cell import build_job

    overrides = [o for o in run.overrides if not o.startswith(("hydra.", "hydra/", "device="))]
    job = build_job(compose([*overrides, *([f"device={device}"] if device else [])]))
    if job.cell.key != run.cell_key:
        raise RetimeRefused(
            f"{run.path}: its overrides compose to cell {job.cell.key[:12]} today, not the recorded "
            f"{run.cell_key[:12]} ({run.describe}): the model's weights, a config or the device kind changed, so "
            "timing it would not time what was judged. Render it again, or retime from where it was rendered"
            + (f" (--device {device} gives another device kind than the run's)" if device else ""))
    return job


def contenders(runs: Sequence[RunDir], device: str | None) -> dict[str, Any]:
    """cell key -> render.timing.sessions.Contender, one per distinct cell (its samples gathered over its runs)."""
    from render.timing.sessions import contenders_of

    return contenders_of(runs, lambda run: _job(run, device))


def default_pairs(runs: Sequence[RunDir], keys: set[str], every_pair: bool) -> list[tuple[str, str]]:
    """Each cell against its anchor (when timed too); with every_pair, also every two cells."""
    pairs = {(r.cell_key, r.anchor_cell_key) for r in runs if not r.is_anchor and r.anchor_cell_key in keys
             and r.cell_key in keys}
    if every_pair:
        ordered = sorted(keys)
        pairs |= {(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1:]}
    return sorted(pairs)


@dataclass(frozen=True)
class Options:
    """How `retime_runs` times: rounds (or a time budget), the device, which pairs, what the sessions are for."""

    rounds: int = DEFAULT_ROUNDS
    seconds: float | None = None
    device: str | None = None
    every_pair: bool = False  # every two cells too, not only each cell against its anchor
    pairwise: bool = False  # one set per pair (two pipelines loaded at a time)
    seed: int = 0
    cells: frozenset[str] | None = None  # time only these cell keys (None: every cell under the paths)
    purpose: str = "retime"
    experiment: str | None = None


@contextmanager
def admission(runs: Sequence[RunDir], sets: Sequence[Sequence[str]], o: Options) -> Iterator[None]:
    """Every set's session admitted at once, before any pipeline loads (render.laws.admission.admitted_timing): the
    holdout lock and the budget of each experiment the runs name. Refused: exit 2, nothing timed or written."""
    from render.errors import RenderError
    from render.laws.admission import admitted_timing

    sessions = [[r for r in runs if r.cell_key in members] for members in sets]
    what = f"{'assess retime' if o.purpose == 'retime' else o.purpose + ' timing'} ({o.rounds} rounds, " \
           f"{len({r.cell_key for group in sessions for r in group})} cells)"
    with ExitStack() as stack:
        try:
            stack.enter_context(admitted_timing(sessions, o.rounds, final=o.purpose == "final", what=what))
        except RenderError as error:
            raise Refused(str(error)) from error
        yield


def retime_runs(paths: Sequence[Path | str], db: Path | str | None = None, options: Options = Options(),
                log: Log | None = None) -> RetimeResult:
    """Time the cells of the runs under `paths` (and their anchors) side by side; record and index each session."""
    from render.errors import RenderError

    try:
        return _retime_runs(paths, db, options, log)
    except RenderError as error:  # a value the renderer refuses (a bad device, rounds too few): one line
        raise RetimeRefused(str(error)) from error


def _retime_runs(paths: Sequence[Path | str], db: Path | str | None, options: Options, log: Log | None
                 ) -> RetimeResult:
    from assess.index.database import Index
    from render.timing.sessions import retime

    o = options
    runs = [r for r in load_runs(list(paths), with_anchors=True) if o.cells is None or r.cell_key in o.cells]
    if not runs:
        raise RetimeRefused(f"no run directories under {', '.join(str(p) for p in paths)}")
    found = contenders(runs, o.device)
    pairs = default_pairs(runs, set(found), o.every_pair)
    if not pairs:
        raise RetimeRefused(f"{len(found)} cell(s) with recorded samples and no pair to time: give a sweep (its cells "
                            "are timed against their anchor, rendered with them) or pass --every-pair with two cells "
                            "or more")
    sets = session_sets(pairs, {r.cell_key for r in runs if r.twin_key is not None}, o.pairwise, log)
    if not sets:
        raise RetimeRefused("every pair to time is two parallel cells, and a session leads one parallel cell's ranks: "
                            "time each against a width-1 cell (its anchor, its twin)")
    result = RetimeResult(labels={r.cell_key: cell_label(r.overrides, r.is_anchor) for r in runs})
    with admission(runs, sets, o), Index.open(db) as index:
        for members in sets:
            group = [found[k] for k in members]
            for c in group:  # each set loads its own pipelines
                c.latencies, c.checked = [], {}
            if log:
                log(f"timing {len(group)} cells side by side for up to {o.rounds} rounds on {group[0].job.device}")
            session = retime(group, rounds=o.rounds, seconds=o.seconds, seed=o.seed, purpose=o.purpose,
                             experiment=o.experiment, recorded=index.upsert_timing)  # a stopped one's rounds too
            index.upsert_timing(session)  # one its run directories did not take (fewer than two left): the index still
            result.sessions.append(session)
            result.pairs += session_pairs(index, session.session, [p for p in pairs if set(p) <= set(members)])
    return result
