"""SWEEP.json, written and read: a sweep's cells, written once preflight has passed and before any cell runs, with the
identity of the process that runs the sweep (so a sweep whose process is gone reads as aborted)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from render.rundir.errors import InvalidRunDirectory
from render.rundir.files import SWEEP_JSON, atomic_write_json, now_iso
from render.rundir.liveness import host_identity
from render.rundir.records import load_json
from render.rundir.redact import redact_data


def sweep_cell(num: int, overrides: list[str], subdir: str, cell_key: str, describe: str, expected_samples: int) -> dict[str, Any]:
    return {"num": num, "overrides": overrides, "subdir": subdir, "cell_key": cell_key, "describe": describe,
            "expected_samples": expected_samples}


def write_sweep(sweep_dir: Path, launcher: str, cells: list[dict[str, Any]]) -> None:
    """Record the sweep's cells; a later batch of the same sweep (Hydra's max_batch_size) appends to them, and a rerun
    that continues an interrupted sweep (hydra_plugins/hypergrid/resume.py) records its cells in their place."""
    path = sweep_dir / SWEEP_JSON
    numbers = {cell["num"] for cell in cells}
    previous = [c for c in load_json(path)["cells"] if c.get("num") not in numbers] if path.exists() else []
    atomic_write_json(path, {"launcher": launcher, "started_at": now_iso(), **host_identity(),
                             "cells": previous + redact_data(cells)})  # no credential of an override kept


@dataclass(frozen=True)
class SweepCell:
    """One cell listed in SWEEP.json (whether or not its run directory exists yet)."""

    job_num: int | None
    overrides: tuple[str, ...]
    cell_key: str | None
    subdir: str | None
    n_expected: int | None
    estimate_s: float | None = None


@dataclass(frozen=True)
class SweepInfo:
    path: Path
    cells: list[SweepCell]
    launcher: str | None
    started_at: str | None
    record: dict[str, Any] = field(default_factory=dict)  # the whole SWEEP.json (host, pid: who runs it)


def _sweep_cell(entry: Any, index: int) -> SweepCell:
    if not isinstance(entry, dict):
        raise TypeError(f"cell {index}: expected an object")
    n_expected = entry.get("expected_samples")
    return SweepCell(
        job_num=int(entry.get("num", index)),
        overrides=tuple(str(o) for o in entry.get("overrides", [])),
        cell_key=entry.get("cell_key"),
        subdir=entry.get("subdir"),
        n_expected=None if n_expected is None else int(n_expected),
        estimate_s=entry.get("estimate_s"),
    )


def load_sweep(path: Path | str) -> SweepInfo | None:
    """SWEEP.json of a sweep folder, or None when the folder has none (Hydra-only sweeps)."""
    path = Path(path).resolve()
    file = path / SWEEP_JSON
    if not file.exists():
        return None
    data = load_json(file)
    cells_raw = data.get("cells")
    if not isinstance(cells_raw, list):
        raise InvalidRunDirectory(f"{file}: missing list 'cells'")
    try:
        cells = [_sweep_cell(entry, i) for i, entry in enumerate(cells_raw)]
    except (TypeError, ValueError) as exc:
        raise InvalidRunDirectory(f"{file}: {exc}") from exc
    return SweepInfo(path=path, cells=cells, launcher=data.get("launcher"), started_at=data.get("started_at"), record=data)
