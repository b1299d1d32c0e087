"""An empty address is refused like a malformed one (issue 61, principle 7): `--x=$VAR` with the variable unset gives
"", and "" must not quietly mean "somewhere else" (a local Ray cluster, every network interface, a local MLflow
store in the working folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from assess.cli import cli
from hydra_plugins.hypergrid import ray_connect


@pytest.mark.parametrize("address", ["", "  "])
def test_an_empty_ray_address_is_refused_and_no_local_cluster_starts(address: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    started: list[Any] = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda *a, **k: started.append(k))
    with pytest.raises(ray_connect.RayUnavailable, match=r"hydra.launcher.address='\s*': empty.*auto, host:port or ray://"):
        ray_connect.connect(address, None)
    assert started == []


def test_no_address_still_means_a_local_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    started: list[Any] = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda *a, **k: started.append(k))
    ray_connect.connect(None, 2)
    assert started and started[0]["num_gpus"] == 2 and "address" not in started[0]


def test_an_empty_metrics_address_is_refused_not_served_on_every_interface(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["status", str(tmp_path), "--serve", "--addr", "", "--db",
                                      str(tmp_path / "index.db")])
    assert result.exit_code == 2 and "--addr" in result.output and "empty" in result.output, result.output
    assert not (tmp_path / "index.db").exists()


def test_an_empty_tracking_uri_is_refused_not_a_local_mlflow_store(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["export", "mlflow", str(tmp_path), "--tracking-uri", "", "--db",
                                      str(tmp_path / "index.db")])
    assert result.exit_code == 2 and "--tracking-uri" in result.output and "empty" in result.output, result.output
    assert not (tmp_path / "mlruns").exists() and not (tmp_path / "mlflow.db").exists()
