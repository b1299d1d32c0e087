"""Side-by-side timing sessions (`assess retime`, docs/timing.md): `timings.jsonl` in each contender's run directory.

A session loads each contender's pipeline once in one process on one device, warms each up, then times them in
rounds: in every round each contender renders the same recorded sample once, in an order shuffled per round. The
whole session is one JSON line, appended (atomically, like every record of the contract) to the `timings.jsonl`
of every run directory it timed, so each copy describes the session completely and the index can be rebuilt from
any of them. Render-time figures (samples.jsonl) are never changed by a session.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from render.rundir.files import append_record, read_lines

TIMINGS = "timings.jsonl"


@dataclass(frozen=True)
class ContenderTiming:
    """One contender of a session: its cell, where its samples were judged, and one latency per round."""

    cell_key: str
    run_dir: str
    latencies: tuple[float, ...]  # seconds of the contender's call in each round, in round order
    warmup_calls: int  # untimed calls before the first round (compile, caches and allocators settle)
    load_s: float  # loading and configuring its pipeline (a calibration render included)
    matched: int = 0  # samples whose timed output is byte-identical to the recorded image (its sha256)
    differed: int = 0  # samples whose timed output is not: what was timed is not exactly what was judged
    unchecked: int = 0  # samples with no recorded digest to check against

    @property
    def verified(self) -> bool | None:
        """True: every checked output matched; False: one differed; None: nothing could be checked."""
        if self.differed:
            return False
        return True if self.matched else None


@dataclass(frozen=True)
class TimingSession:
    """What one side-by-side timing measured (one line of timings.jsonl)."""

    session: str  # a random id: the same session in every contender's copy
    started_at: str
    finished_at: str
    device: str  # the torch device every contender ran on, e.g. cuda:0
    device_name: str  # what the device is (GPU model, CPU)
    host: str
    pid: int  # one process timed every contender
    samples: tuple[tuple[str, int], ...]  # (text identity, seed) each round rendered, in round order
    orders: tuple[tuple[int, ...], ...]  # per round, the contenders' indices in the order they were timed
    contenders: tuple[ContenderTiming, ...]
    device_s: float  # every second of device work the session did: loads, warm-ups, checks and rounds
    complete: bool = True  # False: stopped (a signal, an error) after the rounds recorded here
    purpose: str = "retime"  # retime (the command) | climb (a choice within noise) | final (the headline)
    experiment: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rounds(self) -> int:
        return len(self.samples)

    def contender(self, cell_key: str) -> ContenderTiming | None:
        return next((c for c in self.contenders if c.cell_key == cell_key), None)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TimingSession:
        """A recorded session; KeyError/TypeError/ValueError when a field is missing or malformed."""
        contenders = tuple(ContenderTiming(**{**c, "latencies": tuple(float(x) for x in c["latencies"])})
                           for c in data["contenders"])
        for c in contenders:
            if len(c.latencies) != len(data["samples"]):
                raise ValueError(f"contender {c.cell_key}: {len(c.latencies)} latencies for {len(data['samples'])} rounds")
        return cls(**{**data, "samples": tuple((str(t), int(s)) for t, s in data["samples"]),
                      "orders": tuple(tuple(int(i) for i in o) for o in data["orders"]), "contenders": contenders})


def record_session(session: TimingSession) -> None:
    """Append the session to the timings.jsonl of every run directory it timed (each once)."""
    for folder in dict.fromkeys(c.run_dir for c in session.contenders):
        append_record(Path(folder) / TIMINGS, session.as_dict())


def read_sessions(run_dir: Path) -> tuple[list[TimingSession], list[str]]:
    """The sessions recorded in a run directory, and a problem line for each record that could not be read."""
    sessions, problems = [], []
    for number, data in enumerate(read_lines(run_dir / TIMINGS), 1):
        try:
            sessions.append(TimingSession.from_dict(data))
        except (KeyError, TypeError, ValueError) as error:
            problems.append(f"{run_dir / TIMINGS}: record {number}: {type(error).__name__}: {error}")
    return sessions, problems
