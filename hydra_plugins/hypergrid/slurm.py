"""hydra/launcher=slurm: submitit on SLURM, one GPU per job, a job array with `gpus` jobs at most running.

Jobs that reach their time limit or are preempted are checkpointed and requeued (CellBatch.checkpoint)
and continue with their next missing sample. Arrays larger than the cluster's MaxArraySize are split,
each part starting after the previous one, so the parallelism cap holds across parts.
"""

from __future__ import annotations

import re
import subprocess

from hydra_plugins.hypergrid.batch_launcher import BatchLauncher, Submitted
from hydra_plugins.hypergrid.batches import CellSpec, chunk_batches, plan_batches

SBATCH_KEYS = ("partition", "account", "qos", "constraint", "exclude")


def max_array_size(default: int = 1001) -> int:
    """The cluster's MaxArraySize (scontrol show config), else SLURM's default."""
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return default
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, re.M)
    return int(match.group(1)) if match else default


class SlurmLauncher(BatchLauncher):
    def submit(self, cells: list[CellSpec]) -> Submitted:
        import submitit

        p = self.params
        gpus = int(p["gpus"])
        batches = chunk_batches(plan_batches(cells, gpus), p["cells_per_job"])
        executor = submitit.AutoExecutor(folder=p["submitit_folder"], cluster="slurm", slurm_max_num_timeout=p["max_num_timeout"])
        executor.update_parameters(
            # one task per job: a parallel cell's rank 0 starts its other ranks itself (render.ranks) on the job's GPUs
            name=p["name"], timeout_min=self.timeout_min(batches), gpus_per_node=max(c.gpus for c in cells),
            tasks_per_node=1, nodes=1,
            cpus_per_task=p["cpus_per_task"], mem_gb=p["mem_gb"], slurm_array_parallelism=gpus,
            slurm_signal_delay_s=p["signal_delay_s"], slurm_setup=p["setup"] or [],
            **{f"slurm_{k}": p[k] for k in SBATCH_KEYS if p[k]},
        )
        size = max_array_size()
        submitted: Submitted = []
        previous: str | None = None
        for start in range(0, len(batches), size):
            part = batches[start:start + size]
            extra = dict(p["additional_parameters"])
            if previous:
                extra["dependency"] = f"afterany:{previous}"
            executor.update_parameters(slurm_additional_parameters=extra)
            with executor.batch():
                jobs = [executor.submit(self.batch(b)) for b in part]
            submitted.extend(zip(jobs, part))
            previous = str(jobs[0].job_id).split("_")[0]
        return submitted
