"""The spend log: every second the device worked for an experiment, recorded when it happens.

    <state>/experiments/<name>/spend.jsonl        and the same file beside every ledger copy under an out_root

One line per piece of device work, appended (fsync'ed) to every copy as it ends, whether it succeeded
or not: a sample's pipeline calls (warm-ups and repeats included, a failed or cancelled call up to its
failure), a preflight measurement, a cache's calibration render, a model load, the reference workload. Each line has an id; the
log is the union of its copies, so deleting run folders, sample records or one copy returns nothing to
the budget. A sample line names the sample (cell key, text identity, seed), so a sample found in a run
directory but in no log (rendered before the log existed, or by a version without it) is still counted,
once, from its record.

A reservation's use is the sum of its lines (`rid`); its launch's processes (the launcher and every
worker that inherited `HYPERGRID_RESERVATION`) each register as a holder, and the reservation lives while
any of them runs.
"""

from __future__ import annotations

import os
import secrets
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from render.laws.ledger import EXPERIMENTS, Ledger, ledger_stamp
from render.rundir import append_to_copies, host_identity, read_lines

SPEND = "spend.jsonl"
RESERVATION_ENV = "HYPERGRID_RESERVATION"  # "<experiment>:<reservation id>": a launch's workers share its reservation

if TYPE_CHECKING:  # named for the type checker only: the laws never import the cell module at run time
    from render.cell import Job


class Purpose:
    """What a line of device work was for (the log's vocabulary)."""

    SAMPLE = "sample"
    MEASURE = "measure"  # preflight's one-sample measurement of a cell without history
    CALIBRATE = "calibrate"  # a cache's calibration render (MagCache)
    REFERENCE = "reference"  # the reference workload timed at a cell's start and end (render.run.measure)
    LOAD = "load"  # a model load
    FAILED = "failed"  # a call that raised (out of memory, non-finite output, cancelled, ...)
    RETIME = "retime"  # a side-by-side timing session of the experiment's cells (render.timing.sessions): loads, warm-ups, rounds
    EVIDENCE = "evidence"  # a sample the experiment uses as evidence that no line named: rendered by another run
    # (outside the experiment, another ledger, before the log), at the cost its rendering record states


def spend_copies(ledger: Ledger) -> list[Path]:
    return [path.with_name(SPEND) for path in ledger.copies()]


_STAMPS: dict[tuple[str, Path, Path], dict[str, Any]] = {}  # the ledger in force when this process first spent


def launch_stamp(ledger: Ledger) -> dict[str, Any]:
    """The experiment's identity and the ledger head in force when this process first spent for it (its launch:
    render.laws.ledger.ledger_stamp), read once per process: `{"ledger": {...}}`, or nothing before a chain."""
    key = (ledger.name, ledger.state, ledger.out_root)
    if key not in _STAMPS:
        stamp = ledger_stamp(ledger)
        if not stamp:  # a first launch's preflight measures before its chain starts: asked again next time
            return {}
        _STAMPS[key] = stamp
    return {"ledger": _STAMPS[key]}


def record_spend(ledger: Ledger, seconds: float, purpose: str, *, rid: str | None = None,
                 sample: tuple[str, str, int] | None = None, cell_key: str | None = None,
                 samples: Sequence[tuple[str, str, int]] = ()) -> None:
    """Append device work to every copy of the experiment's spend log (the user's copy must take it), naming the
    experiment's identity and the ledger head of this process's launch: one line, or, for `samples` rendered in
    one call (a batch), one line each with its share of the seconds."""
    named: list[tuple[str, str, int] | None] = [*samples] or [sample]
    share = round(float(seconds) / len(named), 6)
    lines = [{"id": secrets.token_hex(8), "t": time.time_ns(), "s": share, "what": purpose, "rid": rid,
              "cell_key": cell_key, "sample": list(one) if one else None, **host_identity(), **launch_stamp(ledger)}
             for one in named]
    append_to_copies(spend_copies(ledger), lines)


def record_evidence(ledger: Ledger, costs: dict[tuple[str, str, int], float]) -> int:
    """Samples used as evidence (identity -> the device seconds their rendering record states) that no line of the
    log names yet: one `evidence` line each, appended to every copy at once under the ledger's lock, so every reader
    of the log (the climb, the renderer's admission) counts them, once. Returns how many were recorded."""
    with ledger.lock():
        new = sorted(set(costs) - logged_samples(spend_lines(ledger)))
        stamp = ledger_stamp(ledger)
        lines = [{"id": secrets.token_hex(8), "t": time.time_ns(), "s": round(float(costs[i]), 6),
                  "what": Purpose.EVIDENCE, "rid": None, "cell_key": i[0], "sample": list(i), **host_identity(),
                  **({"ledger": stamp} if stamp else {})}
                 for i in new]
        if not lines:
            return 0
        append_to_copies(spend_copies(ledger), lines)
        return len(lines)


def spend_lines(ledger: Ledger) -> list[dict[str, Any]]:
    """The union of the log's copies, each line once."""
    unique: dict[str, dict[str, Any]] = {}
    for path in spend_copies(ledger):
        for line in read_lines(path):
            if "id" in line and "s" in line:
                unique.setdefault(str(line["id"]), line)
    return list(unique.values())


def logged_seconds(lines: list[dict[str, Any]], rid: str | None = None) -> float:
    return sum(float(line["s"]) for line in lines if rid is None or line.get("rid") == rid)


def logged_samples(lines: list[dict[str, Any]]) -> set[tuple[str, str, int]]:
    return {(str(s[0]), str(s[1]), int(s[2])) for line in lines if (s := line.get("sample"))}


# -- whose device work it is -------------------------------------------------------------------


def ledger_of(job: Job) -> tuple[Ledger, str | None] | None:
    """The experiment ledger a job's device work is spent from, and its launch's reservation (if any)."""
    experiment = job.experiment
    if experiment is None:
        return None
    name = experiment.name
    inherited = os.environ.get(RESERVATION_ENV, "")
    rid = inherited.split(":", 1)[1] if inherited.startswith(f"{name}:") else None
    return Ledger(name, job.out_root), rid


@contextmanager
def spending(job: Job, purpose: str, *, sample: tuple[str, str, int] | None = None,
             samples: Sequence[tuple[str, str, int]] = ()) -> Iterator[None]:
    """Time a piece of device work for `job` and record it in its experiment's spend log, however it ends (a call
    that raises is recorded as `failed`, up to the failure); `samples`: a batch's, each spent its share."""
    target = ledger_of(job)
    start = time.perf_counter()
    failed = True
    try:
        yield
        failed = False
    finally:
        if target is not None:
            ledger, rid = target
            cell = getattr(getattr(job, "cell", None), "key", None)
            gpus = job.gpus  # a parallel cell holds its width of devices for the time
            record_spend(ledger, (time.perf_counter() - start) * gpus, Purpose.FAILED if failed else purpose, rid=rid,
                         sample=None if failed else sample, samples=() if failed else samples, cell_key=cell)


def spend_load(job: Job, loaded: Any) -> None:
    """A model load is device work too: recorded once per loaded pipeline, by the first job that uses it."""
    target = ledger_of(job)
    if target is None or loaded.load_spent or not loaded.load_s:
        return
    loaded.load_spent = True
    record_spend(target[0], loaded.load_s * job.gpus, Purpose.LOAD, rid=target[1], cell_key=job.cell.key)


# -- the processes of a launch ---------------------------------------------------------------


def holders_dir(ledger: Ledger, rid: str) -> Path:
    return ledger.state / EXPERIMENTS / ledger.name / "reservations" / f"{rid}.holders"


def hold(ledger: Ledger, rid: str) -> Path:
    """Register this process as a holder of the reservation `rid` (its file names host, pid and start)."""
    from render.rundir import atomic_write_json, now_iso

    folder = holders_dir(ledger, rid)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{os.getpid()}.json"
    atomic_write_json(path, {**host_identity(), "started_at": now_iso()})
    return path


def live_holders(ledger: Ledger, rid: str, *, exclude_self: bool = False) -> list[dict[str, Any]]:
    """The processes of the launch that still run (a worker on another host counts as running)."""
    import json

    from render.rundir import CellState, writer_state

    found = []
    for path in sorted(holders_dir(ledger, rid).glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if exclude_self and record == {**record, **host_identity()}:
            continue
        if writer_state(record, ask_slurm=False)[0] == CellState.RUNNING:
            found.append(record)
    return found
