"""Hydra's shared launcher contract (shipped in hydra-core) for hypergrid's launchers."""

from __future__ import annotations

import pytest
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.test_utils.launcher_common_tests import IntegrationTestSuite, LauncherTestSuite

from hydra_plugins.hypergrid.gpus import GpusLauncher
from hydra_plugins.hypergrid.inprocess import InProcessLauncher
from hydra_plugins.hypergrid.ray_cluster import RayLauncher
from hydra_plugins.hypergrid.slurm import SlurmLauncher

GPUS = ["hydra.launcher.gpus=[0,1]", "hydra.launcher.timeout_min=5"]


@pytest.mark.parametrize("cls", [InProcessLauncher, GpusLauncher, SlurmLauncher, RayLauncher])
def test_discovery(cls: type) -> None:
    assert cls.__name__ in [x.__name__ for x in Plugins.instance().discover(Launcher)]


# The gpus launcher's runs start worker processes (seconds each): the slow tier holds them, as it holds every
# integration run (each is a `python` subprocess).
@pytest.mark.parametrize("launcher_name, overrides", [("inprocess", []), pytest.param("gpus", GPUS, marks=pytest.mark.slow),
                                                      pytest.param("ray", ["hydra.launcher.address=auto"], marks=pytest.mark.ray)])
class TestLauncherContract(LauncherTestSuite):
    pass


@pytest.mark.parametrize(
    "task_launcher_cfg, extra_flags",
    [
        pytest.param({"defaults": [{"override hydra/launcher": "inprocess"}]}, ["-m"], id="inprocess", marks=pytest.mark.slow),
        pytest.param({"defaults": [{"override hydra/launcher": "gpus"}], "hydra": {"launcher": {"gpus": [0], "timeout_min": 5}}},
                     ["-m"], id="gpus", marks=pytest.mark.slow),
        pytest.param({"defaults": [{"override hydra/launcher": "ray"}], "hydra": {"launcher": {"address": "auto"}}},
                     ["-m"], id="ray", marks=pytest.mark.ray),
    ],
)
class TestLauncherIntegration(IntegrationTestSuite):
    pass
