"""What every hypergrid launcher does around its jobs: preflight all cells, record the sweep (summary.py ends it)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Sequence

from hydra.types import HydraContext
from omegaconf import DictConfig, open_dict

log = logging.getLogger("render")


def job_configs(hydra_context: HydraContext, config: DictConfig, job_overrides: Sequence[Sequence[str]],
                initial_job_idx: int) -> list[DictConfig]:
    """Compose every job's config (as Hydra's launchers do), numbered like Hydra numbers them."""
    configs = []
    for offset, overrides in enumerate(job_overrides):
        sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = sweep_config.hydra.job.num = initial_job_idx + offset
        configs.append(sweep_config)
    return configs


def task_part(config: DictConfig) -> DictConfig:
    task = config.copy()
    with open_dict(task):
        del task["hydra"]
    return task


def preflight_sweep(job_overrides: Sequence[Sequence[str]], configs: list[DictConfig]) -> list[Any]:
    """Validate every cell before anything is written; on failure exit 2 listing each bad cell."""
    from render.preflight import PreflightError, exit_with, preflight_all

    try:
        return preflight_all([(list(o), task_part(c)) for o, c in zip(job_overrides, configs)])
    except PreflightError as error:
        exit_with(error)


def write_sweep_record(sweep_dir: Path, launcher: str, job_overrides: Sequence[Sequence[str]], jobs: list[Any], configs: list[DictConfig]) -> None:
    from render.rundir import atomic_write_json, now_iso

    cells = [{"num": int(c.hydra.job.num), "overrides": list(o), "subdir": str(c.hydra.sweep.subdir), "cell_key": j.cell.key,
              "describe": j.cell.describe(), "expected_samples": len(j.sample_ids)}
             for o, c, j in zip(job_overrides, configs, jobs)]
    path = sweep_dir / "SWEEP.json"
    previous = json.loads(path.read_text())["cells"] if path.exists() else []
    atomic_write_json(path, {"launcher": launcher, "started_at": now_iso(), "cells": previous + cells})

