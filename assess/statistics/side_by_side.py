"""Speed-ups from side-by-side timing (render.timing.sessions, `assess retime`): how they are computed and read back.

The speed-up of a cell over another (`against`) comes from the rounds of one session only, where both were timed
in the same process on the same device: each round gives one ratio, against's latency over the cell's (both
rendered the same sample, one right after the other in a shuffled order). The figure is the **median of the
per-round ratios**, with a **distribution-free 95 % interval** from the order statistics (the binomial interval
of a median; Hodges & Lehmann): it holds for any distribution of the ratios, only assuming the rounds are
exchangeable. Why not a t interval on the log ratios: on a shared machine a burst of load that hits one call of
a round and not the other gives that round a wild ratio; the mean (and its t interval) follows it, the median does
not, and the interval does not pretend the ratios are normal. Interleaving is what makes rounds exchangeable: a
trend of the machine shifts both sides of a round alike.

A figure of two cells that were never timed side by side is a ratio of render-time medians from different
processes: shown as "timed apart", with the margin between runs that the replication benchmark measured
(TIMED_APART_MARGIN), and never used to rank the two on speed alone.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assess.statistics.estimate import CONFIDENCE, Estimate

# How far apart render-time speed-ups of the same pair of cells land in independent runs on a busy machine: the
# 90th percentile of |log(run / median of the other runs)| over every pair and run of `benchmarks/timing.py
# --replicate` (6 processes under load, shapes model, this project's 2-core machine, 2026-12-02: ±173 %; side by
# side ±25 %; docs/timing.md), as a fraction. Measured, not assumed; re-measure there on your own machines.
TIMED_APART_MARGIN = 1.73
SIDE_BY_SIDE = "side by side"
TIMED_APART = "timed apart"


def median_interval_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, int] | None:
    """1-based ranks (l, n + 1 - l) of the order statistics that bound the median with at least `confidence`
    coverage (binomial, p = 1/2); None when n is too small for any such interval."""
    from scipy.stats import binom

    tail = (1 - confidence) / 2
    lower = int(binom.ppf(tail, n, 0.5))  # P(X <= lower - 1) <= tail
    while lower > 0 and binom.cdf(lower - 1, n, 0.5) > tail:
        lower -= 1
    while binom.cdf(lower, n, 0.5) <= tail:
        lower += 1
    return (lower, n + 1 - lower) if lower >= 1 else None


def round_speedup(cell: Sequence[float], against: Sequence[float], confidence: float = CONFIDENCE) -> Estimate | None:
    """The speed-up of `cell` over `against` from paired rounds (one latency of each per round): the median of
    against / cell over the rounds, with the order-statistic interval (module doc); None without a round."""
    ratios = sorted(a / c for c, a in zip(cell, against, strict=True) if c > 0 and a > 0)
    if not ratios:
        return None
    ranks = median_interval_ranks(len(ratios), confidence)
    if ranks is None:
        return Estimate(statistics.median(ratios), None, None, len(ratios),
                        note=f"{len(ratios)} round(s): too few for a {confidence:.0%} interval")
    return Estimate(statistics.median(ratios), ratios[ranks[0] - 1], ratios[ranks[1] - 1], len(ratios))


@dataclass(frozen=True)
class PairTiming:
    """The side-by-side speed-up of `cell` over `against` from one session."""

    cell: str
    against: str
    speedup: Estimate
    session: str
    device: str
    device_name: str | None
    finished_at: str
    verified: bool | None  # every checked output of both matched its recorded image (None: nothing checked)
    complete: bool

    @property
    def how(self) -> str:
        checked = {True: "outputs match the judged images", False: "an output differs from the judged image",
                   None: "outputs not checked"}[self.verified]
        return (f"{SIDE_BY_SIDE}: {self.speedup.n} interleaved rounds in one process on {self.device} "
                f"({self.device_name}), session {self.session}; {checked}")

    def as_dict(self) -> dict[str, Any]:
        return {"cell": self.cell, "against": self.against, "speedup": self.speedup.value, "low": self.speedup.low,
                "high": self.speedup.high, "rounds": self.speedup.n, "method": "median of per-round ratios, "
                "order-statistic 95% interval", "timed": SIDE_BY_SIDE, "how": self.how, "session": self.session,
                "device": self.device, "device_name": self.device_name, "at": self.finished_at,
                "verified": self.verified, "complete": self.complete}


def _verified(*cells: dict[str, Any]) -> bool | None:
    if any(c["differed"] for c in cells):
        return False
    return True if all(c["matched"] for c in cells) else None


def session_pairs(index: Any, session: str, pairs: Sequence[tuple[str, str]]) -> list[PairTiming]:
    """The speed-up of each (cell, against) pair of one recorded session."""
    head = index.query("SELECT * FROM timing_sessions WHERE session = ?", (session,))
    if not head:
        return []
    cells = {r["cell_key"]: r for r in index.query("SELECT * FROM timing_cells WHERE session = ?", (session,))}
    out = []
    for cell, against in pairs:
        if cell not in cells or against not in cells:
            continue
        estimate = round_speedup(json.loads(cells[cell]["latencies"]), json.loads(cells[against]["latencies"]))
        if estimate is not None:
            out.append(PairTiming(cell, against, estimate, session, head[0]["device"], head[0]["device_name"],
                                  head[0]["finished_at"], _verified(cells[cell], cells[against]),
                                  bool(head[0]["complete"])))
    return out


def side_by_side(index: Any, cell: str, against: str) -> PairTiming | None:
    """The latest session that timed `cell` and `against` side by side, as their speed-up (None: never)."""
    untimed: frozenset[str] = getattr(index, "untimed", frozenset())  # cells assess.report.reads knows no session timed
    if cell in untimed or against in untimed:
        return None
    rows = index.query(
        "SELECT s.session FROM timing_sessions s JOIN timing_cells a ON a.session = s.session AND a.cell_key = ? "
        "JOIN timing_cells b ON b.session = s.session AND b.cell_key = ? WHERE s.rounds > 0 "
        "ORDER BY s.complete DESC, s.finished_at DESC, s.rounds DESC LIMIT 1", (cell, against))
    if not rows:
        return None
    found = session_pairs(index, rows[0]["session"], [(cell, against)])
    return found[0] if found else None


def timed_apart_note(margin: float = TIMED_APART_MARGIN) -> str:
    return (f"{TIMED_APART}: render-time medians of different processes, not comparable beyond "
            f"±{margin:.0%} (assess retime times them side by side)")


def timed_apart(estimate: Estimate, margin: float = TIMED_APART_MARGIN) -> Estimate:
    """A render-time speed-up marked as timed apart: its interval widened to at least the measured margin between
    runs, and the note saying so."""
    low = estimate.value / (1 + margin) if estimate.low is None else min(estimate.low, estimate.value / (1 + margin))
    high = estimate.value * (1 + margin) if estimate.high is None else max(estimate.high, estimate.value * (1 + margin))
    note = timed_apart_note(margin) + (f"; {estimate.note}" if estimate.note else "")
    return Estimate(estimate.value, low, high, estimate.n, note=note)


def same_work(index: Any, cell_keys: Sequence[str], split: str) -> dict[str, str]:
    """cell key -> the earlier cell (in `cell_keys` order) whose images it reproduces byte for byte on every sample
    both have (one at least): the same work, so the same speed; such cells are one result, never ranked apart (a
    cache that never engaged, an axis value that changed nothing). Cells that reproduce nobody are left out.
    A parallel or batched cell reproduces its single-call twin's pixels by design (assess.statistics.parity) with other work (on
    other GPUs, or a batch a call): it is never the same work as another cell, in any tool, and its speed is ranked."""
    from assess.statistics.width import cell_batch, cell_width

    cell_keys = [k for k in cell_keys if cell_width(index, k) == 1 and cell_batch(index, k) == 1]
    if len(cell_keys) < 2:
        return {}
    marks = ", ".join("?" * len(cell_keys))
    rows = index.query(f"SELECT cell_key, prompt_sha, seed, sha256 FROM samples WHERE split = ? AND sha256 IS NOT NULL "
                       f"AND cell_key IN ({marks})", (split, *cell_keys))
    images: dict[str, dict[tuple[str, int], str]] = {}
    holders: dict[tuple[str, int, str], list[int]] = {}  # (sample, image digest) -> the cells holding it, in order
    position = {key: i for i, key in enumerate(cell_keys)}
    for r in rows:
        images.setdefault(r["cell_key"], {})[(r["prompt_sha"], r["seed"])] = r["sha256"]
        holders.setdefault((r["prompt_sha"], r["seed"], r["sha256"]), []).append(position[r["cell_key"]])
    out: dict[str, str] = {}
    for i, key in enumerate(cell_keys):
        mine = images.get(key, {})
        # only a cell holding one of these very images can reproduce them all: no pass over every earlier cell
        # (5,000 cells were 12 million comparisons)
        candidates = sorted({j for (prompt, seed), digest in mine.items() for j in holders[(prompt, seed, digest)]
                             if j < i})
        for earlier in (cell_keys[j] for j in candidates):
            theirs = images.get(earlier, {})
            shared = mine.keys() & theirs.keys()
            if earlier not in out and shared and all(mine[k] == theirs[k] for k in shared):
                out[key] = earlier
                break
    return out


def latency_ratios(index: Any, cell_keys: Sequence[str]) -> dict[tuple[str, str], tuple[float, float | None, float | None, int]]:
    """(a, b) -> latency(a) / latency(b) with its interval and rounds, for every two of `cell_keys` that a session
    timed side by side (the latest such session; complete ones first): what the climb decides with between them."""
    keys = list(dict.fromkeys(cell_keys))
    if len(keys) < 2:
        return {}
    marks = ", ".join("?" * len(keys))
    rows = index.query(
        f"SELECT c.session, c.cell_key, c.latencies FROM timing_cells c JOIN timing_sessions s USING (session) "
        f"WHERE c.cell_key IN ({marks}) AND s.rounds > 0 ORDER BY s.complete, s.finished_at, s.rounds", keys)
    sessions: dict[str, dict[str, list[float]]] = {}
    for r in rows:  # oldest first: a later session overwrites an earlier one's figure below
        sessions.setdefault(r["session"], {})[r["cell_key"]] = json.loads(r["latencies"])
    out: dict[tuple[str, str], tuple[float, float | None, float | None, int]] = {}
    for timed in sessions.values():
        for a, lat_a in timed.items():
            for b, lat_b in timed.items():
                ratio = round_speedup(lat_b, lat_a) if a != b else None  # b's speed-up over a: median of a / b
                if ratio is not None:
                    out[(a, b)] = (ratio.value, ratio.low, ratio.high, ratio.n)
    return out
