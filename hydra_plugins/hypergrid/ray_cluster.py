"""hydra/launcher=ray: a sweep's jobs as Ray tasks, each holding its width of GPUs on one node of a Ray cluster.

The jobs are the gpus launcher's (batches.place over the cluster's GPUs: cells grouped per model load, balanced by
cost, a parallel cell's job as wide as the cell), each a Ray task asking `num_gpus` = its width: Ray runs a task on
one node, so a parallel cell's GPUs are one node's (no placement group is needed for one task), and Ray sets the
task's CUDA_VISIBLE_DEVICES, which run.json records. A task runs the job's cells one after another in one worker
process (worker.CellBatch, as a submitit job does), in the sweep's working folder with the launching shell's
environment (the budget's reservation among it), so the run directories are written where the sweep says: on
one machine, or on a filesystem every node shares (Ray moves no files).

- `hydra.launcher.address`: `auto` (the cluster `ray start` runs here), `ray://host:10001` (Ray Client), or null:
  a local cluster started for the sweep with `hydra.launcher.gpus` GPUs (default: this machine's CUDA count);
- a task whose worker process or node dies is retried (`max_retries`) and resumes where it stopped: finished cells
  (DONE.json) and finished samples (skip-if-done) are not rendered again;
- Ctrl-C / SIGTERM cancels the tasks (ray.cancel: the cell in flight records `cancelled`);
- `hydra.launcher.wait=false` submits the sweep itself as a Ray job (the Jobs API: its driver runs on the cluster
  and waits there), prints its id and `assess status`, and returns.

Built on `ray` directly rather than hydra-ray-launcher (1.2.2: AWS-only, pinned to old Ray): what a job is, where
it runs and how it resumes are the other launchers' (BatchLauncher), so this module is only the submission.
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Sequence

from hydra_plugins.hypergrid.batch_launcher import BatchLauncher, Submitted
from hydra_plugins.hypergrid.placement import CellSpec, place
from hydra_plugins.hypergrid.ray_connect import cluster_gpus
from hydra_plugins.hypergrid.worker import JOB_ID_ENV

log = logging.getLogger(__name__)

# what a worker takes of the launching shell's environment: hypergrid's own (the budget's reservation, its state, cache
# and index), the hub's, torch's and the thread counts; CUDA_VISIBLE_DEVICES is Ray's to set. A fixed list keeps a
# sweep's runtime environment the same from one sweep to the next, so Ray builds it once.
PASSED = ("HYPERGRID_", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "DIFFUSERS_", "TORCH", "TORCHINDUCTOR_", "OMP_",
          "MKL_", "OPENBLAS_", "NCCL_", "PYTORCH_", "CUBLAS_", "CUDA_LAUNCH_BLOCKING")


class RayJob:
    """A submitted task, as the launchers' wait, collect and cancel see a job (submitit's job interface)."""

    def __init__(self, ref: Any, job_id: str) -> None:
        self.ref, self.job_id, self.state = ref, job_id, "RUNNING"

    def done(self) -> bool:
        import ray

        ready, _ = ray.wait([self.ref], timeout=0, fetch_local=False)
        return bool(ready)

    def result(self) -> Any:
        import ray
        from ray import exceptions

        try:
            value = ray.get(self.ref)
        except exceptions.TaskCancelledError:
            self.state = "CANCELLED"
            raise
        except exceptions.OutOfMemoryError:
            self.state = "OUT_OF_MEMORY"
            raise
        except (exceptions.WorkerCrashedError, exceptions.NodeDiedError):
            self.state = "NODE_FAIL"
            raise
        except Exception:
            self.state = "FAILED"
            raise
        self.state = "COMPLETED"
        return value

    def cancel(self, check: bool = False) -> None:
        import ray

        ray.cancel(self.ref)  # a KeyboardInterrupt in the task: its cell in flight records `cancelled`

    def stderr(self) -> str:
        return "(a Ray task's output is in the cluster's worker logs: `ray logs`)"


def run_batch(batch: Any, job_id: str, cwd: str) -> Any:
    """What a task runs: the job's cells, in the sweep's working folder, named as the launcher's job (the batch reads
    the launching shell's credentials from the file the launcher wrote: render.run.secrets, never from Ray's runtime
    environment)."""
    os.chdir(cwd)
    os.environ[JOB_ID_ENV] = job_id
    return batch()


def passed_environment() -> dict[str, str]:
    """What a worker takes of the launching shell's environment (PASSED)."""
    return {k: v for k, v in os.environ.items() if k.startswith(PASSED)}


class RayLauncher(BatchLauncher):
    def environment(self) -> dict[str, str]:
        return passed_environment()

    def submit(self, cells: list[CellSpec]) -> Submitted:
        import secrets

        import ray

        assert self.handed is not None
        p = self.params
        gpus = cluster_gpus(p["address"], p["gpus"])  # connected (by the sweeper's preflight, in this process)
        remote = ray.remote(max_calls=1)(run_batch)  # each job a fresh worker process, as a submitit job is
        sweep = secrets.token_hex(3)
        cwd = str(Path.cwd())
        submitted: Submitted = []
        for n, (slot, batch) in enumerate(place(cells, list(range(gpus)))):
            job_id = f"ray-{sweep}-{n}"
            options = remote.options(num_gpus=len(slot), num_cpus=p["cpus_per_task"], max_retries=p["max_retries"],
                                     retry_exceptions=False, name=job_id, runtime_env={"env_vars": self.handed.env})
            submitted.append((RayJob(options.remote(self.batch(batch), job_id, cwd), job_id), batch))
        log.info("submitted %d Ray task(s) on a cluster of %d GPU(s)", len(submitted), gpus)
        return submitted

    def hand_over(self, cells: list[CellSpec], sweep_dir: Path) -> Any:
        """`wait=false`: a task ends with the driver that submitted it, so the sweep's own command, waiting, runs as
        a Ray job on the cluster (into this sweep's folder) and this process returns."""
        from hydra_plugins.hypergrid.batch_launcher import submitted_returns

        from render.laws.admission import hold_for_jobs

        argv = [a for a in sys.argv[1:] if not a.startswith(("hydra.launcher.wait=", "hydra.sweep.dir="))]
        dashboard = job_server(self.params["address"])
        job = submit_detached(dashboard, [*argv, f"hydra.sweep.dir={sweep_dir}"], Path.cwd(), sweep_dir)
        hold_for_jobs([job], ray_dashboard=dashboard)  # an experiment's reservation lives while the Ray job does
        print(f"submitted the sweep as Ray job {job}: its driver runs on the cluster (`ray job logs {job}`, "
              f"`ray job stop {job}`)")
        print(f"follow it with: assess status {sweep_dir}")
        return submitted_returns([(job, cells)])


def job_server(address: str | None) -> str:
    """The cluster's job server (`ray start --head` serves it on the dashboard's port, 8265): RAY_DASHBOARD_ADDRESS,
    or the head's host at port 8265."""
    assert address, "the sweeper's preflight refuses wait=false without an address"
    return os.environ.get("RAY_DASHBOARD_ADDRESS") or (
        "http://127.0.0.1:8265" if address in ("auto", "local") else "http://" + address.split("://")[-1].split(":")[0] + ":8265")


def submit_detached(dashboard: str, argv: Sequence[str], cwd: Path, sweep_dir: Path) -> str:
    """`hydra.launcher.wait=false`: the sweep's own command line (waiting) submitted as a Ray job, whose driver runs
    on the cluster's head and outlives this process (and adopts this launch's budget reservation); its id. The
    credentials (variables, and the overrides that carry one) reach the driver through a file only this user can read
    (its path in $HYPERGRID_SECRETS_FILE; the driver reads it, appends those overrides to its command line and removes
    it: render.run.secrets), not through the job's info (its runtime environment, its entrypoint)."""
    from ray.job_submission import JobSubmissionClient

    from render.run.secrets import SECRETS_ENV, hand

    handed = hand(passed_environment(), sweep_dir, argv)
    entrypoint = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "render", *handed.argv, "hydra.launcher.wait=true"])
    client = JobSubmissionClient(dashboard)
    env = {**handed.env, **({SECRETS_ENV: str(handed.file)} if handed.file else {})}
    return str(client.submit_job(entrypoint=f"cd {shlex.quote(str(cwd))} && {entrypoint}", runtime_env={"env_vars": env}))
