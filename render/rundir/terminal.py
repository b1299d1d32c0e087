"""The terminal record of a run directory: exactly one of DONE.json or FAILED.json, written last."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from render.rundir.redact import redact_data
from render.rundir.files import DONE, FAILED, atomic_write_json, now_iso
from render.rundir.records import read_terminal
from render.rundir.states import Category, CellState


def terminal_state(run_dir: Path) -> CellState | None:
    """DONE, FAILED or None (running or crashed)."""
    terminal = read_terminal(run_dir)
    return None if terminal is None else terminal.kind


def write_failed(run_dir: Path, category: Category | str, message: str, traceback: str, **extra: Any) -> None:
    try:
        category = Category(category)
    except ValueError:
        raise ValueError(f"failure category {category!r}: valid are {', '.join(c.value for c in Category)}") from None
    atomic_write_json(run_dir / FAILED, redact_data({"category": category.value, "message": message,
                                                     "traceback": traceback, "failed_at": now_iso(), **extra}))


def write_done(run_dir: Path, **summary: Any) -> None:
    atomic_write_json(run_dir / DONE, {"finished_at": now_iso(), **summary})
