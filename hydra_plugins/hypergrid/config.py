"""Launcher options, registered in Hydra's ConfigStore (kept import-light for plugin discovery)."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore


@dataclass
class InProcessLauncherConf:
    """Every cell in this process, one after another; each model is loaded once."""

    _target_: str = "hydra_plugins.hypergrid.inprocess.InProcessLauncher"


ConfigStore.instance().store(group="hydra/launcher", name="inprocess", node=InProcessLauncherConf, provider="hypergrid")


@dataclass
class HypergridSweeperConf:
    """Hydra's basic sweeper (cartesian product of the sweep overrides), with a preflight of every
    cell before the sweep folder is created."""

    _target_: str = "hydra_plugins.hypergrid.sweeper.HypergridSweeper"
    max_batch_size: Optional[int] = None  # launch the cells in batches of this many (null: one batch)
    params: Optional[Dict[str, str]] = None  # sweep overrides given in config instead of the command line


ConfigStore.instance().store(group="hydra/sweeper", name="hypergrid", node=HypergridSweeperConf, provider="hypergrid")


@dataclass
class BatchQueueConf:
    """What the gpus and slurm launchers share (as hydra-submitit-launcher's BaseQueueConf): cells
    spread over submitit jobs, each running its cells in one process. Defaults live here only."""

    submitit_folder: str = "${hydra.sweep.dir}/.submitit/%j"  # submitit's job files (pickles, scripts, stdout/stderr)
    timeout_min: Optional[int] = None  # per job; null: derived from the cells' cost (steps x samples x s/step history)
    signal_delay_s: int = 60  # how long before the time limit the job is told to checkpoint
    max_num_timeout: int = 3  # how many times a job that hits its time limit (or is preempted) restarts where it left off


@dataclass
class GpusLauncherConf(BatchQueueConf):
    """One machine, several GPUs: at most one job per GPU, each job sees only its own GPU
    (CUDA_VISIBLE_DEVICES) and runs its cells one after another, loading each model once."""

    _target_: str = "hydra_plugins.hypergrid.gpus.GpusLauncher"
    gpus: Optional[List[int]] = None  # GPU indices to use; null: every GPU found (torch.cuda.device_count())


@dataclass
class SlurmLauncherConf(BatchQueueConf):
    """SLURM through submitit: one GPU per job, a job array with at most `gpus` jobs running at once."""

    _target_: str = "hydra_plugins.hypergrid.slurm.SlurmLauncher"
    signal_delay_s: int = 120  # longer than on one machine: SLURM checks time limits only every ~30 s
    gpus: int = 1  # the most GPUs used at once: the arrays' parallelism (= jobs when every cell is 1 GPU wide)
    cells_per_job: Optional[int] = None  # null: the cells are spread over `gpus` jobs; N: jobs of at most N cells
    partition: Optional[str] = None  # sbatch --partition
    account: Optional[str] = None  # sbatch --account
    qos: Optional[str] = None  # sbatch --qos
    constraint: Optional[str] = None  # sbatch --constraint, e.g. the GPU type: h100|a100
    exclude: Optional[str] = None  # sbatch --exclude: nodes to avoid
    cpus_per_task: Optional[int] = None  # CPUs per job
    mem_gb: Optional[int] = None  # memory per job in GB; null: the partition's default
    setup: Optional[List[str]] = None  # shell lines run before the job, e.g. ["module load cuda/12.4", "source venv/bin/activate"]
    wait: bool = True  # false: submit, print the job ids and the `assess status` command, and return
    additional_parameters: Dict[str, Any] = field(default_factory=dict)  # any other sbatch option, e.g. {"mail-type": "END"}
    name: str = "${hydra.job.name}"  # the job name in squeue


@dataclass
class RayLauncherConf(BatchQueueConf):
    """A Ray cluster: the gpus launcher's jobs as Ray tasks, each holding its width of GPUs on one node."""

    _target_: str = "hydra_plugins.hypergrid.ray_cluster.RayLauncher"
    address: Optional[str] = None  # auto | ray://host:10001; null: a local cluster started for the sweep
    gpus: Optional[int] = None  # a local cluster's declared GPUs; null: this machine's CUDA count
    cpus_per_task: int = 1  # CPUs each task holds (Ray's num_cpus)
    max_retries: int = 3  # times a task whose worker process or node died runs again, resuming where it stopped
    wait: bool = True  # false: the sweep runs as a Ray job on the cluster (needs `address`); this command returns


ConfigStore.instance().store(group="hydra/launcher", name="gpus", node=GpusLauncherConf, provider="hypergrid")
ConfigStore.instance().store(group="hydra/launcher", name="ray", node=RayLauncherConf, provider="hypergrid")
ConfigStore.instance().store(group="hydra/launcher", name="slurm", node=SlurmLauncherConf, provider="hypergrid")
