"""SWEEP.json: a sweep's cells, written once preflight has passed and before any cell runs, with the
identity of the process that runs the sweep (so a sweep whose process is gone reads as aborted)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from render.rundir.files import SWEEP_JSON, atomic_write_json, now_iso
from render.rundir.liveness import host_identity
from render.rundir.records import load_json


def sweep_cell(num: int, overrides: list[str], subdir: str, cell_key: str, describe: str, expected_samples: int) -> dict[str, Any]:
    return {"num": num, "overrides": overrides, "subdir": subdir, "cell_key": cell_key, "describe": describe,
            "expected_samples": expected_samples}


def write_sweep(sweep_dir: Path, launcher: str, cells: list[dict[str, Any]]) -> None:
    """Record the sweep's cells; a later batch of the same sweep (Hydra's max_batch_size) appends to them."""
    path = sweep_dir / SWEEP_JSON
    previous = load_json(path)["cells"] if path.exists() else []
    atomic_write_json(path, {"launcher": launcher, "started_at": now_iso(), **host_identity(), "cells": previous + cells})
