"""Hydra's shared launcher contract (shipped in hydra-core) for hypergrid's launchers."""

from __future__ import annotations

import pytest
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.test_utils.launcher_common_tests import IntegrationTestSuite, LauncherTestSuite

from hydra_plugins.hypergrid.gpus import GpusLauncher
from hydra_plugins.hypergrid.inprocess import InProcessLauncher
from hydra_plugins.hypergrid.slurm import SlurmLauncher

GPUS = ["hydra.launcher.gpus=[0,1]", "hydra.launcher.timeout_min=5"]


@pytest.mark.parametrize("cls", [InProcessLauncher, GpusLauncher, SlurmLauncher])
def test_discovery(cls: type) -> None:
    assert cls.__name__ in [x.__name__ for x in Plugins.instance().discover(Launcher)]


# The gpus launcher's runs start worker processes (seconds each): the slow tier holds them, as it holds every
# integration run (each is a `python` subprocess).
@pytest.mark.parametrize("launcher_name, overrides", [("inprocess", []), pytest.param("gpus", GPUS, marks=pytest.mark.slow)])
class TestLauncherContract(LauncherTestSuite):
    pass


@pytest.mark.parametrize(
    "task_launcher_cfg, extra_flags",
    [
        pytest.param({"defaults": [{"override hydra/launcher": "inprocess"}]}, ["-m"], id="inprocess"),
        pytest.param({"defaults": [{"override hydra/launcher": "gpus"}], "hydra": {"launcher": {"gpus": [0], "timeout_min": 5}}},
                     ["-m"], id="gpus"),
    ],
)
@pytest.mark.slow
class TestLauncherIntegration(IntegrationTestSuite):
    pass
