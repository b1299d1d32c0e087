"""What every hypergrid launcher does around its jobs: preflight all cells, record the sweep (summary.py ends it)."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any, Sequence

from hydra.types import HydraContext
from omegaconf import DictConfig, open_dict, read_write

log = logging.getLogger("render")

# The configs the sweeper composed for its preflight, by (master config, job number, overrides): the launcher
# of the same process takes each once instead of composing the cell again. Each entry holds its master config,
# so no other config can take its id while the entry is there.
_COMPOSED: dict[tuple[int, int, tuple[str, ...]], tuple[DictConfig, DictConfig]] = {}


def job_configs(hydra_context: HydraContext, config: DictConfig, job_overrides: Sequence[Sequence[str]],
                initial_job_idx: int, *, keep: bool = False) -> list[DictConfig]:
    """Compose every job's config (as Hydra's launchers do), numbered like Hydra numbers them. `keep`: the
    sweeper's preflight composes them, and an in-process launcher then takes each (once) without composing again."""
    if keep:
        _COMPOSED.clear()  # one sweep's at a time: a later sweep in this process never sees an earlier one's
    configs = []
    for offset, overrides in enumerate(job_overrides):
        key = (id(config), initial_job_idx + offset, tuple(overrides))
        _, sweep_config = _COMPOSED.pop(key, (config, None))
        if sweep_config is None:
            sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
            with open_dict(sweep_config):
                sweep_config.hydra.job.id = sweep_config.hydra.job.num = initial_job_idx + offset
        if keep:
            _COMPOSED[key] = (config, sweep_config)
        configs.append(sweep_config)
    return configs


def name_folders_by_swept_keys(config: DictConfig, fixed_keys: Sequence[str]) -> None:
    """A cell's folder holds the cell's own overrides only: the keys every cell shares (out_root=...,
    prompts=...) are left out of `hydra.job.override_dirname`, through Hydra's own exclude_keys, which
    every job's config (composed again from the master's hydra overrides, here or in a submitted job) takes."""
    excluded = [*config.hydra.job.config.override_dirname.exclude_keys, *fixed_keys]
    if not fixed_keys:
        return
    quoted = ",".join("'" + key.replace("\\", "\\\\").replace("'", "\\'") + "'" for key in dict.fromkeys(excluded))
    with read_write(config), open_dict(config):
        config.hydra.overrides.hydra.append(f"hydra.job.config.override_dirname.exclude_keys=[{quoted}]")
        config.hydra.job.config.override_dirname.exclude_keys = list(dict.fromkeys(excluded))


def task_part(config: DictConfig) -> DictConfig:
    """The cell's config as its job sees it (no hydra node): a copy of its own, through pickle (a 300-cell
    preflight makes 300; pickle is a third of the time of `copy`)."""
    try:
        task = pickle.loads(pickle.dumps(config, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 - a value pickle refuses: the slower copy
        task = config.copy()
    with open_dict(task):
        del task["hydra"]
    return task


def preflight_sweep(job_overrides: Sequence[Sequence[str]], configs: list[DictConfig]) -> list[Any]:
    """Validate every cell before anything is written; on failure exit 2 listing each bad cell."""
    from render.errors import RenderError
    from render.run.preflight import exit_with, preflight_all, unexpected

    try:
        return preflight_all([(list(o), task_part(c)) for o, c in zip(job_overrides, configs)])
    except RenderError as error:
        exit_with(error)
    except Exception as error:  # noqa: BLE001 - preflight is the only gate: no sweep folder for any failure
        exit_with(unexpected(error))


def preflight_widths(config: DictConfig, jobs: Sequence[Any]) -> None:
    """Each cell runs on GPUs of its own: a cell wider than the gpus launcher's GPUs (given or found), or than the
    slurm launcher's cap on GPUs at once, is refused here, exit 2, before any folder exists (render's preflight
    checks this machine's count)."""
    target = str(config.hydra.launcher.get("_target_", ""))
    if target.endswith("GpusLauncher"):
        from hydra_plugins.hypergrid.devices import visible_gpus

        gpus = visible_gpus(config.hydra.launcher.get("gpus"))
        has, fix = f"hydra/launcher=gpus has {len(gpus)} ({', '.join(map(str, gpus))})", "hydra.launcher.gpus=[0,1,...]"
        count = len(gpus)
    elif target.endswith("RayLauncher"):
        from hydra_plugins.hypergrid.ray_connect import cluster_gpus

        count = cluster_gpus(config.hydra.launcher.get("address"), config.hydra.launcher.get("gpus"))
        has, fix = f"the Ray cluster declares {count}", "a cluster with more GPUs"
    elif target.endswith("SlurmLauncher"):
        count = int(config.hydra.launcher.get("gpus") or 1)
        has, fix = f"hydra/launcher=slurm runs at most {count} at once", "hydra.launcher.gpus=N with N >= the width"
    else:
        return
    from render.run.preflight import PreflightError, exit_with

    wide = [job for job in jobs if job.gpus > count]
    if wide:
        exit_with(PreflightError(
            f"cell {wide[0].cell.describe()} is {wide[0].gpus} GPUs wide and {has}; valid widths here are 1 to "
            f"{count}: give the launcher more GPUs ({fix}) or choose a narrower parallel option"))


def preflight_launcher(config: DictConfig) -> None:
    """A launcher that cannot start jobs from here fails before SWEEP.json exists, with one message (exit 2);
    so does a sweep folder that cannot be written."""
    from render.cell import ConfigError
    from render.run.environment import check_writable_folder
    from render.run.preflight import exit_with

    try:
        if config.get("out_root") is not None:  # named first: the sweep folder lies under it by default
            check_writable_folder(str(config.out_root), "out_root")
        check_writable_folder(str(config.hydra.sweep.dir), "hydra.sweep.dir")
    except ConfigError as error:
        exit_with(error)
    if str(config.hydra.launcher.get("_target_", "")).endswith("GpusLauncher"):
        from hydra_plugins.hypergrid.devices import visible_gpus

        visible_gpus(config.hydra.launcher.get("gpus"))  # exits 2 naming the fix when there is no GPU
    if str(config.hydra.launcher.get("_target_", "")).endswith("RayLauncher"):
        from hydra_plugins.hypergrid.ray_connect import RayUnavailable, cluster_gpus

        if not config.hydra.launcher.get("wait", True) and config.hydra.launcher.get("address") is None:
            exit_with(RuntimeError("hydra.launcher.wait=false needs a running cluster (hydra.launcher.address=auto or "
                                   "ray://host:10001): a cluster started for the sweep ends with it; nothing was submitted"))
        try:  # connects (or starts the local cluster) once: the launcher reuses the connection
            cluster_gpus(config.hydra.launcher.get("address"), config.hydra.launcher.get("gpus"))
        except (RayUnavailable, ImportError) as error:
            exit_with(RuntimeError(str(error) if isinstance(error, RayUnavailable) else
                                   f"hydra/launcher=ray needs Ray: pip install 'hypergrid[ray]' ({error})"))
    if str(config.hydra.launcher.get("_target_", "")).endswith("SlurmLauncher"):
        from render.run.environment import slurm_controller_problem

        problem = slurm_controller_problem()
        if problem:
            exit_with(RuntimeError(f"hydra/launcher=slurm: no SLURM controller can be reached ({problem}); nothing was "
                                   "submitted. Run the sweep on a login node of the cluster, or use hydra/launcher=gpus "
                                   "(one job per local GPU) or the default in-process launcher"))


def write_sweep_record(sweep_dir: Path, launcher: str, job_overrides: Sequence[Sequence[str]], jobs: list[Any], configs: list[DictConfig]) -> None:
    from render.rundir import sweep_cell, write_sweep

    write_sweep(sweep_dir, launcher, [sweep_cell(int(c.hydra.job.num), list(o), str(c.hydra.sweep.subdir), j.cell.key,
                                                 j.cell.describe(), len(j.sample_ids))
                                      for o, c, j in zip(job_overrides, configs, jobs)])

