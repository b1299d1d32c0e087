"""What the GPU and SLURM launchers share: compose every cell, spread the cells over jobs (grouped by
model, balanced by cost), submit one CellBatch per job, then wait (or return at once when detached).

Built on hydra-submitit-launcher's BaseSubmititLauncher (its parameter handling and setup); the one
thing a subclass provides is `submit`.
"""

from __future__ import annotations

import logging
import os
from abc import abstractmethod
from pathlib import Path
from typing import Any, Sequence

from hydra.core.utils import JobReturn, JobStatus, configure_log, setup_globals
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher
from omegaconf import OmegaConf

from hydra_plugins.hypergrid import lifecycle as sweep
from hydra_plugins.hypergrid.placement import CellSpec, cell_spec, seconds_per_step, timeout_minutes
from hydra_plugins.hypergrid.oom import oom_kills
from hydra_plugins.hypergrid.watch import watch
from hydra_plugins.hypergrid.worker import CellBatch, collect
from render.run.secrets import Handed, forget, hand, private_folder, withheld
from render.run.signals import Cancelled

log = logging.getLogger(__name__)
Submitted = list[tuple[Any, list[CellSpec]]]


class BatchLauncher(BaseSubmititLauncher):
    handed: Handed | None = None  # what this sweep handed its engine: the plain environment, the credentials' file

    @abstractmethod
    def submit(self, cells: list[CellSpec]) -> Submitted:
        """Submit the cells as jobs; return each job with the cells it runs."""

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None and self.hydra_context is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        configs = sweep.job_configs(self.hydra_context, self.config, job_overrides, initial_job_idx)
        cells = [cell_spec(o, c) for o, c in zip(job_overrides, configs)]
        self.out_root = Path(str(OmegaConf.select(configs[0], "out_root", default=".")))
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if not self.params.get("wait", True):
            handed = self.hand_over(cells, sweep_dir)
            if handed is not None:
                return handed
        oom_before = oom_kills()
        submitted = self.submit_privately(cells, sweep_dir)
        if not self.params.get("wait", True):  # only slurm has the option: its jobs read the credentials file later
            return detached(submitted, sweep_dir)
        try:
            watch(submitted)
            return collect(submitted, oom_before)
        except Cancelled:  # SIGTERM / SIGINT to the launcher: its jobs stop too, and their cells record it
            log.warning("cancelled: stopping %d job(s); each records `cancelled` in the cell it interrupts", len(submitted))
            self.stop(submitted)
            collect(submitted, oom_before)
            raise
        finally:  # every job has ended: its credentials file goes (a detached sweep's stays for its jobs' requeues)
            forget(self.handed.file if self.handed else None)

    def environment(self) -> dict[str, str]:
        """What a job takes of this process's environment: all of it (sbatch and submitit's local controller pass it
        on), the Ray launcher a fixed part."""
        return dict(os.environ)

    def submit_privately(self, cells: list[CellSpec], sweep_dir: Path) -> Submitted:
        """Submit the cells with the credentials kept from the engine (render.run.secrets): written to a file only
        this user reads, whose path each job's CellBatch carries, and out of the environment the engine inherits
        while it is handed the jobs; submitit's job files (the pickled cells with their overrides, the scripts, the
        logs) in a folder only this user reads."""
        from submitit.core.utils import JobPaths

        self.handed = hand(self.environment(), sweep_dir)
        if self.params.get("submitit_folder"):
            folder = JobPaths.get_first_id_independent_folder(self.params["submitit_folder"]).absolute()
            if sweep_dir.absolute() in folder.parents:
                private_folder(folder)  # a folder of the user's choice elsewhere is theirs to keep private
        try:
            with withheld([k for k in self.environment() if k not in self.handed.env]):
                submitted = self.submit(cells)
        except BaseException:
            forget(self.handed.file)
            raise
        record_jobs(sweep_dir, submitted)
        return submitted

    def hand_over(self, cells: list[CellSpec], sweep_dir: Path) -> list[JobReturn] | None:
        """`wait=false` where the jobs cannot outlive this process: hand the whole sweep to something that waits for
        it elsewhere and return its cells as submitted (None: the jobs outlive it, as SLURM's do)."""
        return None

    def stop(self, submitted: Submitted) -> None:
        """Ask every job to stop (SLURM: scancel, whose SIGTERM the scheduler delivers)."""
        for job, _ in submitted:
            job.cancel(check=False)

    def batch(self, cells: Sequence[CellSpec]) -> CellBatch:
        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        return CellBatch(self.hydra_context, self.config, self.task_function, cells,
                         self.handed.file if self.handed else None)

    def timeout_min(self, batches: Sequence[Sequence[CellSpec]]) -> int:
        """The configured time limit, else one derived from the costliest job's cells."""
        if self.params["timeout_min"]:
            return int(self.params["timeout_min"])
        models = {c.model for b in batches for c in b}
        s_per_step = max(seconds_per_step(self.out_root, m) for m in models)
        minutes = max(timeout_minutes(b, s_per_step) for b in batches)
        log.info("time limit per job derived from the cost estimate: %d min", minutes)
        return minutes


def record_jobs(sweep_dir: Path, submitted: Submitted) -> None:
    """JOBS.json: which scheduler job runs which cells (for a person, or scancel, to map job ids to cells)."""
    from render.rundir.redact import redact_data
    from render.rundir import JOBS_JSON, atomic_write_json, now_iso

    path = sweep_dir / JOBS_JSON
    previous = OmegaConf.to_container(OmegaConf.load(path)) if path.exists() else []
    if not isinstance(previous, list):
        raise ValueError(f"{path}: expected a list of jobs, found a {type(previous).__name__}; move it aside and resubmit")
    jobs = [{"job_id": str(job.job_id), "submitted_at": now_iso(), "cells": [{"num": c.num, "run_dir": str(c.run_dir), "overrides": list(c.overrides)} for c in cells]}
            for job, cells in submitted]
    atomic_write_json(path, [*previous, *redact_data(jobs)])  # no credential of an override kept


def detached(submitted: Submitted, sweep_dir: Path) -> list[JobReturn]:
    from render.laws.admission import hold_for_jobs

    hold_for_jobs([str(job.job_id) for job, _ in submitted])  # an experiment's reservation outlives this process
    print(f"submitted {len(submitted)} job(s): {' '.join(str(job.job_id) for job, _ in submitted)}")
    print(f"follow them with: assess status {sweep_dir}")
    return submitted_returns([(str(job.job_id), cells) for job, cells in submitted])


def submitted_returns(jobs: Sequence[tuple[str, Sequence[CellSpec]]]) -> list[JobReturn]:
    """A JobReturn per cell of jobs submitted and left running (`wait=false`)."""
    returns = []
    for job_id, cells in jobs:
        for cell in cells:
            ret = JobReturn(overrides=list(cell.overrides), status=JobStatus.COMPLETED,
                            _return_value=[{"status": "submitted", "job_id": job_id, "run_dir": str(cell.run_dir)}])
            ret.working_dir = str(cell.run_dir)
            returns.append(ret)
    return returns
