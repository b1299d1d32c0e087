"""Launcher options, registered in Hydra's ConfigStore (kept import-light for plugin discovery)."""

from dataclasses import dataclass
from typing import Dict, Optional

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
