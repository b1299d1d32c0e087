"""Launcher options, registered in Hydra's ConfigStore (kept import-light for plugin discovery)."""

from dataclasses import dataclass

from hydra.core.config_store import ConfigStore


@dataclass
class InProcessLauncherConf:
    """Every cell in this process, one after another; each model is loaded once."""

    _target_: str = "hydra_plugins.hypergrid_launcher.inprocess.InProcessLauncher"


ConfigStore.instance().store(group="hydra/launcher", name="inprocess", node=InProcessLauncherConf, provider="hypergrid")
