"""A cell's width and its width-1 twin, read from the index: what a parallel cell (render.axes.parallel) is to the
tools that rank, merge and cost cells. A leaf of assess: it imports nothing of assess."""

from __future__ import annotations

import json
from typing import Any

from render.rundir.records import twin_key


def indexed_cell(index: Any, cell_key: str) -> dict[str, Any] | None:
    """A cell as its indexed runs record it (the run's `cell` JSON); None when the index has no run of it or this
    version cannot read it."""
    runs_of = getattr(index, "runs_of", None)  # an Index (or assess.report.reads's, its rows read once)
    rows = runs_of(cell_key)[:1] if runs_of else index.query("SELECT cell FROM runs WHERE cell_key = ? LIMIT 1",
                                                              (cell_key,))
    try:
        cell = json.loads(rows[0]["cell"]) if rows else None
    except (TypeError, ValueError):
        return None
    return cell if isinstance(cell, dict) else None


def cell_width(index: Any, cell_key: str) -> int:
    """The devices a cell holds, read from its indexed cell (render.axes.parallel.width_of; 1 without a parallel
    value, or when the index has no run of it)."""
    from render.axes.parallel import width_of

    cell = indexed_cell(index, cell_key)
    try:
        return width_of(cell.get("parallel")) if cell else 1
    except (TypeError, ValueError):  # a parallel value this version cannot read: counted as one device
        return 1


def cell_batch(index: Any, cell_key: str) -> int:
    """The samples a cell renders per pipeline call (render.cell: batch), read from its indexed cell (1 without one)."""
    cell = indexed_cell(index, cell_key)
    batch = cell.get("batch") if cell else None
    return batch if isinstance(batch, int) and not isinstance(batch, bool) and batch > 0 else 1


def twin_of(index: Any, cell_key: str) -> str | None:
    """A parallel cell's width-1 twin's key, read from its indexed cell (render.rundir.records.twin_key)."""
    cell = indexed_cell(index, cell_key)
    return twin_key(cell) if cell else None
