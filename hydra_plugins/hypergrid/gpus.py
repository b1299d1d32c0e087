"""hydra/launcher=gpus: one machine, at most one job per GPU, each job sees only its own GPU (its own slot of
GPUs for a parallel cell: cells of each width side by side in slots of their width, batches.place).

Hydra's stock submitit_local launcher gives every job the same devices and runs all jobs at once;
here one submitit LocalExecutor per GPU pins CUDA_VISIBLE_DEVICES, and each GPU gets one job that
runs its share of the cells in one process.
"""

from __future__ import annotations

from hydra_plugins.hypergrid.batch_launcher import BatchLauncher, Submitted
from hydra_plugins.hypergrid.placement import CellSpec, place
from hydra_plugins.hypergrid.devices import visible_gpus


class GpusLauncher(BatchLauncher):
    def submit(self, cells: list[CellSpec]) -> Submitted:
        import submitit

        jobs = place(cells, visible_gpus(self.params["gpus"]))
        timeout = self.timeout_min([batch for _, batch in jobs])
        submitted: Submitted = []
        for gpus, batch in jobs:  # a parallel cell's ranks run on its slot's GPUs (render.run.ranks)
            executor = submitit.LocalExecutor(folder=self.params["submitit_folder"], max_num_timeout=self.params["max_num_timeout"])
            executor.update_parameters(visible_gpus=gpus, gpus_per_node=len(gpus), timeout_min=timeout,
                                       signal_delay_s=self.params["signal_delay_s"])
            submitted.append((executor.submit(self.batch(batch)), batch))
        return submitted

    def stop(self, submitted: Submitted) -> None:
        """SIGTERM to each job's submitit controller, which passes it to its worker (LocalJob.cancel would send
        SIGINT, on which the controller kills the worker a second later, maybe before its cell recorded it)."""
        import signal

        for job, _ in submitted:
            process = getattr(job, "_process", None)
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
