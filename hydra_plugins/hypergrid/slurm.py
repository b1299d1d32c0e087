"""hydra/launcher=slurm: submitit on SLURM, one GPU per job, a job array with `gpus` jobs at most running.

A parallel cell's job requests its width in GPUs (one task: its rank 0 starts the others, render.run.ranks), and
`gpus` caps GPUs, not jobs: cells of each width are an array of their own, requesting that width, with the cap
shared out between the arrays (batches.allot) so that they run side by side; when the widths do not fit beside
each other under the cap, the arrays run one after another, widest first, each with the whole cap.

Jobs that reach their time limit or are preempted are checkpointed and requeued (CellBatch.checkpoint)
and continue with their next missing sample. Arrays larger than the cluster's MaxArraySize are split,
each part starting after the previous one, so the parallelism cap holds across parts.
"""

from __future__ import annotations

import re
import subprocess

from hydra_plugins.hypergrid.batch_launcher import BatchLauncher, Submitted
from hydra_plugins.hypergrid.placement import CellSpec, allot, by_width, chunk_batches, plan_batches

SBATCH_KEYS = ("partition", "account", "qos", "constraint", "exclude")


def max_array_size(default: int = 1001) -> int:
    """The cluster's MaxArraySize (scontrol show config), else SLURM's default."""
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return default
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, re.M)
    return int(match.group(1)) if match else default


def waves(cells: list[CellSpec], gpus: int) -> list[dict[int, int]]:
    """Arrays per wave (width -> jobs running at once), waves one after another: every width in one wave when they
    fit beside each other under the cap, else one wave per width, widest first."""
    count = allot(cells, gpus)
    if count is not None:
        return [count]
    return [{width: max(1, gpus // width)} for width in by_width(cells)]


class SlurmLauncher(BatchLauncher):
    def submit(self, cells: list[CellSpec]) -> Submitted:
        p = self.params
        groups = by_width(cells)
        submitted: Submitted = []
        before: list[str] = []  # the arrays of the previous wave: the next wave starts after them
        for wave in waves(cells, int(p["gpus"])):
            arrays = []
            for width, running in wave.items():
                batches = chunk_batches(plan_batches(groups[width], running), p["cells_per_job"])
                jobs, last = self._array(batches, width, running, before)
                submitted.extend(jobs)
                arrays.append(last)
            before = arrays
        return submitted

    def _array(self, batches: list[list[CellSpec]], width: int, running: int, after: list[str]
               ) -> tuple[Submitted, str]:
        """One array of jobs of `width` GPUs, at most `running` at once, started after the arrays `after`; arrays
        larger than the cluster's MaxArraySize are split, each part after the previous one. Its jobs and the last
        part's array id (it ends last: the next wave starts after it)."""
        import submitit

        p = self.params
        executor = submitit.AutoExecutor(folder=p["submitit_folder"], cluster="slurm", slurm_max_num_timeout=p["max_num_timeout"])
        executor.update_parameters(
            # one task per job: a parallel cell's rank 0 starts its other ranks itself (render.run.ranks) on the job's GPUs
            name=p["name"], timeout_min=self.timeout_min(batches), gpus_per_node=width,
            tasks_per_node=1, nodes=1,
            cpus_per_task=p["cpus_per_task"], mem_gb=p["mem_gb"], slurm_array_parallelism=running,
            slurm_signal_delay_s=p["signal_delay_s"], slurm_setup=p["setup"] or [],
            **{f"slurm_{k}": p[k] for k in SBATCH_KEYS if p[k]},
        )
        size = max_array_size()
        submitted: Submitted = []
        previous = list(after)
        for start in range(0, len(batches), size):
            part = batches[start:start + size]
            extra = dict(p["additional_parameters"])
            if previous:
                extra["dependency"] = "afterany:" + ":".join(previous)
            executor.update_parameters(slurm_additional_parameters=extra)
            with executor.batch():
                jobs = [executor.submit(self.batch(b)) for b in part]
            submitted.extend(zip(jobs, part))
            previous = [str(jobs[0].job_id).split("_")[0]]
        return submitted, previous[0]
