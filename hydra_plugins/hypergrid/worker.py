"""What runs inside a submitted job: a batch of cells, one after another, in one process.

A batch is a submitit Checkpointable: on preemption or time limit it is requeued whole, and on
restart finished cells (DONE.json) and finished samples (skip-if-done) are not rendered again, so at
most the sample in flight is lost.
"""

from __future__ import annotations

import logging
import os
from contextlib import nullcontext
from pathlib import Path
from typing import Any, ContextManager, Sequence

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, run_job, setup_globals
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict

from hydra_plugins.hypergrid.placement import CellSpec
from hydra_plugins.hypergrid.oom import oom_note
from render.rundir import Category
from render.run.signals import Cancelled, cancel_on_signals

log = logging.getLogger(__name__)
JOB_ID_ENV = "HYPERGRID_JOB_ID"  # set by a launcher whose jobs are not submitit's (hydra_plugins.hypergrid.ray_cluster)


class CellBatch:
    def __init__(self, hydra_context: HydraContext, config: DictConfig, task_function: TaskFunction,
                 cells: Sequence[CellSpec], secrets: Path | None = None) -> None:
        self.hydra_context, self.config, self.task_function = hydra_context, config, task_function
        self.cells = list(cells)
        self.secrets = secrets  # the file the launcher wrote this sweep's credentials to (render.run.secrets): its path only
        self.singleton_state = Singleton.get_state()

    def __call__(self) -> list[JobReturn]:
        import submitit

        from render.rundir.redact import install
        from render.run.quiet import filter_third_party_warnings
        from render.run.secrets import adopt_secrets

        # a worker is an entry point of its own: no log line of it carries a credential (render.rundir.redact), the
        # credentials it needs come from the launcher's file, never from the engine (render.run.secrets)
        install()
        adopt_secrets(self.secrets)
        filter_third_party_warnings()  # render.run.quiet
        Singleton.set_state(self.singleton_state)
        setup_globals()
        job_id = os.environ.get(JOB_ID_ENV) or submitit.JobEnvironment().job_id  # a Ray task's, else submitit's
        returns: list[JobReturn] = []
        try:
            with stop_signals():
                for cell in self.cells:
                    sweep_config = self.hydra_context.config_loader.load_sweep_config(self.config, list(cell.overrides))
                    job = sweep_config.hydra.job
                    with open_dict(job):
                        job.id = f"{job_id}_{cell.num}"
                        job.num = cell.num
                    returns.append(run_job(hydra_context=self.hydra_context, task_function=self.task_function,
                                           config=sweep_config, job_dir_key="hydra.sweep.dir",
                                           job_subdir_key="hydra.sweep.subdir"))
        except Cancelled as error:  # the cell in flight recorded it; the cells after it never started
            rest = self.cells[len(returns):]
            mark_unfinished(rest, Category.CANCELLED, f"job {job_id} was cancelled ({error}) before this cell ended", "")
            returns.extend(_return_from_run_dir(cell) for cell in rest)
        return returns

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        import submitit

        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)


def stop_signals() -> ContextManager[None]:
    """SIGTERM / SIGINT cancel the cell in flight, on one machine (hydra/launcher=gpus) and in a Ray task (ray.cancel
    interrupts it). Under SLURM submitit keeps its own handling: SIGTERM comes before a preemption's requeue there,
    and scancel is read from the job's state."""
    if os.environ.get("SUBMITIT_EXECUTOR") == "local" or os.environ.get(JOB_ID_ENV):
        return cancel_on_signals()
    return nullcontext()


def failure_category(error: BaseException, job: Any) -> Any:
    """The category of the scheduler's final state of the job (render.rundir.category_of_job_state), else error."""
    from render.rundir import category_of_job_state

    return category_of_job_state(str(getattr(job, "state", ""))) or Category.ERROR


def mark_unfinished(cells: Sequence[CellSpec], category: Any, message: str, detail: str) -> None:
    """Give every cell of a failed job that has no terminal record a FAILED.json of its own."""
    from render.rundir import DONE, FAILED, write_failed

    for cell in cells:
        if cell.run_dir.is_dir() and ((cell.run_dir / DONE).exists() or (cell.run_dir / FAILED).exists()):
            continue
        cell.run_dir.mkdir(parents=True, exist_ok=True)
        write_failed(cell.run_dir, category, message, detail, job_failed=True)


def collect(submitted: Sequence[tuple[Any, Sequence[CellSpec]]], oom_before: int | None = None) -> list[JobReturn]:
    """Wait for every job; a job that died (cancelled, timed out, crashed) marks its unfinished cells. `oom_before`:
    the out-of-memory killer's count when the jobs started (hydra_plugins.hypergrid.oom): a job that died
    without a category while it rose is `oom`."""
    returns: list[JobReturn] = []
    for job, cells in submitted:
        try:
            returns.extend(job.result())
        except Exception as error:  # noqa: BLE001 - every job is waited for; the failure is recorded per cell
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            message = f"job {job.job_id} ended {getattr(job, 'state', 'unknown')}: {first_line}"
            detail = f"{error}\n\n--- job stderr (tail) ---\n{_stderr_tail(job)}"
            category, note = failure_category(error, job), oom_note(oom_before)
            if category == Category.ERROR and note:
                category, message = Category.OOM, f"{message} ({note})"
            mark_unfinished(cells, category, message, detail)
            returns.extend(_return_from_run_dir(cell) for cell in cells)
    return returns


def _return_from_run_dir(cell: CellSpec) -> JobReturn:
    """A JobReturn for a cell whose job died, read back from the cell's terminal record."""
    import json

    from render.rundir import FAILED, CellState

    result: dict[str, Any] = {"status": CellState.DONE.value, "describe": " ".join(cell.overrides), "run_dir": str(cell.run_dir)}
    if (cell.run_dir / FAILED).exists():
        failed = json.loads((cell.run_dir / FAILED).read_text())
        result.update(status=CellState.FAILED.value, category=failed["category"], message=failed["message"])
    ret = JobReturn(overrides=list(cell.overrides), status=JobStatus.COMPLETED, _return_value=[result])
    ret.working_dir = str(cell.run_dir)
    return ret


def _stderr_tail(job: Any, lines: int = 40) -> str:
    try:
        text = job.stderr() or ""
    except Exception:  # noqa: BLE001 - forensics are best effort
        return "(no stderr)"
    return "\n".join(text.splitlines()[-lines:])
