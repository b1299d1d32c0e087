"""Preflight: every cell is composed and validated before anything is launched or written.

Checks what a schema cannot: value ranges, prompt files, an attention backend that cannot run here,
a cache the model cannot take, a scheduler the model family lacks, a local model folder that is
not there. Errors name the bad value and what would be valid.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any, NoReturn

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from render.attention import BackendUnavailable, check_attention_usable
from render.caches import check_cache_supported
from render.cell import ConfigError, Job, build_job
from render.pipeline import BUILTIN_PREFIX, quiet_libraries
from render.prompts import PromptError
from render.schedulers import check_scheduler_supported

log = logging.getLogger("render")


class PreflightError(ValueError):
    """One or more cells cannot run; nothing was launched or written."""


def check_model(model: Any) -> None:
    if model.id.startswith(BUILTIN_PREFIX):
        return
    if model.id.startswith((".", "/", "~")):
        folder = Path(model.id).expanduser()
        if not (folder / "model_index.json").is_file():
            raise ConfigError(f"model.id={model.id}: no diffusers pipeline folder there (no model_index.json); "
                              "give a folder written by save_pretrained, or a hub id such as black-forest-labs/FLUX.1-dev")
    import diffusers

    if not hasattr(diffusers, model.pipeline):
        raise ConfigError(f"model.pipeline={model.pipeline}: diffusers {diffusers.__version__} has no such pipeline class")


def check_job(job: Job) -> None:
    """Environment checks for a built job; raises with a message naming the bad value."""
    for cell in (job.cell, job.anchor):
        check_attention_usable(cell.attention, cell.device_kind)
        check_scheduler_supported(cell.scheduler, cell.model.family)
    if job.cell.cache["name"] != "none":
        quiet_libraries()  # the check imports the pipeline module: keep transformers' import chatter out
    check_cache_supported(job.cell.model.pipeline, job.cache_conf)
    check_model(job.cell.model)


def preflight_config(cfg: DictConfig) -> Job:
    """Build and check one cell's job; every failure becomes a PreflightError."""
    try:
        job = build_job(cfg)
        check_job(job)
    except (ConfigError, PromptError, BackendUnavailable, ValueError) as error:
        raise PreflightError(str(error)) from None
    return job


def preflight_all(configs: list[tuple[list[str], DictConfig]]) -> list[Job]:
    """Check every cell of a sweep; report all bad cells at once."""
    jobs, problems = [], []
    for overrides, cfg in configs:
        try:
            jobs.append(preflight_config(cfg))
        except PreflightError as error:
            problems.append(f"  [{' '.join(overrides) or 'defaults'}] {error}")
    if problems:
        raise PreflightError(f"{len(problems)} of {len(configs)} cells cannot run; nothing was launched:\n" + "\n".join(problems))
    return jobs


def exit_with(error: BaseException, code: int = 2) -> NoReturn:
    """End the command with the message alone: these are user errors, a traceback would bury them."""
    print(f"error: {error}", file=sys.stderr)
    raise SystemExit(code)


class PreflightCallback(Callback):
    """Hydra callback: a single run is checked before Hydra creates its run directory.

    Hydra turns exceptions raised by callbacks into warnings and carries on, so a failed check
    exits here (SystemExit is not an Exception) before the run folder exists.
    """

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        from omegaconf import open_dict

        task = config.copy()
        with open_dict(task):
            del task["hydra"]
        try:
            preflight_config(task)
        except PreflightError as error:
            exit_with(error)
