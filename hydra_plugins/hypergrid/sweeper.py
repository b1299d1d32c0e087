"""Hydra's basic sweeper with a preflight: every cell is composed and checked before the sweep
folder exists, whatever launcher then runs the cells; the sweep's cells are recorded in SWEEP.json."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, List, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from hydra_plugins.hypergrid import resume, summary
from hydra_plugins.hypergrid import lifecycle as sweep
from render.run.live_metrics import MetricsUnavailable, start_exporter, stop_exporter
from render.run.preflight import PreflightError, exit_with
from render.rundir import MULTIRUN_YAML


class HypergridSweeper(BasicSweeper):
    def __init__(self, max_batch_size: Optional[int] = None, params: Optional[dict] = None) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)

    def sweep(self, arguments: List[str]) -> Any:
        assert self.config is not None and self.hydra_context is not None and self.launcher is not None
        started = time.perf_counter()  # the sweep's own time: its composition and preflight, its cells' jobs
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        overrides = parser.parse_overrides([*self._parse_config(), *arguments])
        sweep.name_folders_by_swept_keys(self.config, [o.key_or_group for o in overrides if not o.is_sweep_override()])
        self.overrides = self.split_arguments(overrides, self.max_batch_size)
        job_overrides = [job for batch in self.overrides for job in batch]
        sweep.preflight_launcher(self.config)  # exits 2 when the launcher cannot start jobs from here, before anything is written
        configs = sweep.job_configs(self.hydra_context, self.config, job_overrides, 0, keep=True)
        jobs = sweep.preflight_sweep(job_overrides, configs)  # exits 2, listing every bad cell, before any folder exists
        sweep.preflight_widths(self.config, jobs)  # exits 2 when a cell is wider than the launcher's GPUs

        earlier = resume.interrupted(self.config, job_overrides, jobs)  # the same command after an interruption
        if earlier is not None:
            resume.continue_in(self.config, configs, earlier)
            print(f"continuing the interrupted sweep {earlier}: its finished samples are kept, the rest rendered")
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        foreign = resume.other_sweep(sweep_dir, job_overrides)
        if foreign is not None:  # exit 2 before anything is written: two sweeps in one folder mix silently
            exit_with(PreflightError(foreign))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / MULTIRUN_YAML)
        launcher = str(self.config.hydra.launcher._target_).rsplit(".", 1)[-1]
        sweep.write_sweep_record(sweep_dir, launcher, job_overrides, jobs, configs)

        returns, initial_job_idx = [], 0
        try:
            exporter = start_exporter(sweep_dir, self.config.get("metrics"))  # metrics.port / metrics.textfile
        except MetricsUnavailable as error:  # preflight found the port free; something took it since
            exit_with(error)
        try:
            while not self.is_done():
                batch = self.get_job_batch()
                returns.append(self.launcher.launch(batch, initial_job_idx=initial_job_idx))
                initial_job_idx += len(batch)
        finally:
            stop_exporter(exporter)
        from render.timing.sweep_round import time_sweep

        elapsed = time.perf_counter() - started
        from render.rundir import cell_label

        timed = time_sweep(sweep_dir, jobs, elapsed, launcher, waits=bool(self.config.hydra.launcher.get("wait", True)),
                           labels=[cell_label(o) for o in job_overrides],
                           interleaved=getattr(self.launcher, "rounds", None))  # the in-process launcher's rounds
        summary.summarise([r for batch in returns for r in batch], sweep_dir, [timed.line(sweep_dir, elapsed)])
        return returns
