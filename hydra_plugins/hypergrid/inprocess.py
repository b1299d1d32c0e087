"""The default launcher: every cell in this process, with a progress bar over the cells.

The cells the sweep's side-by-side timing takes are opened one after another, then their samples rendered in
interleaved rounds (render.timing.interleave): their renders are the timing. `rounds` is what those rounds timed, which
the sweeper's round (render.timing.sweep_round) completes."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Optional, Sequence

from hydra.core.utils import JobReturn, configure_log, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from hydra_plugins.hypergrid import lifecycle as sweep

log = logging.getLogger("render")


class InProcessLauncher(Launcher):
    def __init__(self) -> None:
        super().__init__()
        self.config: Optional[DictConfig] = None
        self.task_function: Optional[TaskFunction] = None
        self.hydra_context: Optional[HydraContext] = None
        self.rounds: Optional[Any] = None  # render.timing.sweep_round.RoundOutcome of the interleaved rounds

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from render.run.progress import progress

        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        configs = sweep.job_configs(self.hydra_context, self.config, job_overrides, initial_job_idx)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        from render.timing.interleave import CURRENT, Interleave

        returns = []
        interleave = Interleave()
        token = CURRENT.set(interleave)  # the task opens the cells it takes, and leaves their samples to drive()
        bar = progress(total=len(configs), desc="cells", unit="cell")  # clean lines when stderr is no terminal
        try:
            for config in configs:
                returns.append(run_job(hydra_context=self.hydra_context, task_function=self.task_function,
                                       config=config, job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir"))
                bar.update(1)
        finally:
            bar.close()
            CURRENT.reset(token)
        self.rounds = interleave.drive()  # the results in `returns` are completed in place
        return returns
