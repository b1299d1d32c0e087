"""How noisy a cell's speed figures are (docs/timing.md), from its sample rows alone (pure; no project imports).

The noise figure is the larger of the warm calls' spread, IQR / median (each call divided by its job's reference
workload when every call has one, so differences between jobs are not counted as noise), and the reference
workload's largest drift over one of the cell's runs. Above NOISY_ABOVE the cell is flagged noisy: its figures are
too uncertain to rank it against a cell a few per cent away.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

NOISY_ABOVE = 0.15  # a noise figure above this flags the cell noisy
MIN_SPREAD_CALLS = 4  # fewer warm calls than this measure no spread (the reference's drift still counts)


def calls_of(row: Any) -> list[float]:
    """A sample's warm calls: each repeated call (latency_calls, JSON in the index) or its one latency."""
    calls = _get(row, "latency_calls")
    if isinstance(calls, str):
        calls = json.loads(calls)
    return [float(c) for c in calls] if calls else [float(_get(row, "latency_s"))]


def _get(row: Any, column: str) -> Any:
    """A column of an index row or a dict, or a SampleRecord's field; None when the row predates it."""
    if not hasattr(row, "__getitem__"):
        return getattr(row, column, None)
    try:
        return row[column]
    except (KeyError, IndexError):  # a row of an index or record older than the column
        return None


def normalised(rows: Sequence[Any]) -> list[float] | None:
    """Each warm sample's latency / its job's reference workload, or None unless every one has a reference."""
    refs = [_get(r, "ref_s") for r in rows]
    if not rows or any(not ref for ref in refs):
        return None
    return [float(_get(r, "latency_s")) / float(ref) for r, ref in zip(rows, refs, strict=True)]


def noisy_reason(figure: float | None, reason: str | None) -> str | None:
    """The reason a stored noise figure (the index's speed_noise value and detail) flags its cell, or None."""
    return reason if figure is not None and figure > NOISY_ABOVE else None


def by_sample(rows: Sequence[Any]) -> dict[str, list[float]]:
    """(text identity, seed) -> the sample's latency, per its job's reference when every row has one: the shape
    assess.statistics.compare.speed_ratio pairs two cells by."""
    per_ref = normalised(rows)
    values = per_ref if per_ref is not None else [float(_get(r, "latency_s")) for r in rows]
    return {f"{_get(r, 'prompt_sha') or _get(r, 'text_id')}/{_get(r, 'seed')}": [v] for r, v in zip(rows, values, strict=True)}


@dataclass(frozen=True)
class Noise:
    """How noisy a cell's speed figures are (module docstring)."""

    figure: float | None  # max(spread, drift); None when neither could be measured
    spread: float | None  # IQR / median of the warm calls
    drift: float | None  # the reference's largest relative drift over one of the cell's runs
    n_calls: int
    normalised: bool  # the spread is of calls divided by their job's reference

    @property
    def noisy(self) -> bool:
        return self.figure is not None and self.figure > NOISY_ABOVE

    def reason(self) -> str:
        """Why the figure is what it is, in words (the noisy flag's reason)."""
        parts = []
        if self.spread is not None:
            parts.append(f"warm calls spread {self.spread:.0%} (IQR/median of {self.n_calls}"
                         f"{', per reference' if self.normalised else ''})")
        else:
            parts.append(f"{self.n_calls} warm call(s): too few to measure their spread")
        if self.drift is not None:
            parts.append(f"reference drifted {self.drift:.0%} during a run")
        return ("noisy: " if self.noisy else "") + "; ".join(parts)


def noise(warm: Sequence[Any], drifts: Iterable[float | None] = ()) -> Noise:
    """The noise figure of a cell's warm samples, given the reference drift of each run that rendered them."""
    refs = [_get(r, "ref_s") for r in warm]
    per_ref = bool(warm) and all(refs)
    calls = [c / float(ref) if per_ref else c for r, ref in zip(warm, refs, strict=True) for c in calls_of(r)]
    spread = None
    if len(calls) >= MIN_SPREAD_CALLS:
        q1, _, q3 = statistics.quantiles(calls, n=4, method="inclusive")
        spread = (q3 - q1) / statistics.median(calls)
    known = [d for d in drifts if d is not None]
    drift = max(known) if known else None
    figures = [f for f in (spread, drift) if f is not None]
    return Noise(max(figures) if figures else None, spread, drift, len(calls), per_ref)
