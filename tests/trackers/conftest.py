"""Fixtures of the tracker tests: a real tiny-model sweep (rendered and scored once per session), a real MLflow
tracking server on localhost (started here), and the Prometheus server that .ci/prometheus/up.sh starts.

Nothing here skips: a component that is missing fails the test that needs it, with the command that brings it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_render

PROMETHEUS_URL = os.environ.get("HYPERGRID_PROMETHEUS_URL", "http://127.0.0.1:9090")
PROMETHEUS_TARGET_PORT = int(os.environ.get("HYPERGRID_PROMETHEUS_TARGET_PORT", "9464"))  # what up.sh scrapes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, timeout_s: float, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{process.args[:4]} ended with {process.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} did not answer within {timeout_s:.0f} s")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.fixture(scope="session")
def scored_sweep(tiny_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sweep folder, index): two cells and their anchor rendered by `python -m render` on the tiny model, scored."""
    from assess.scoring.ingest import score

    root = tmp_path_factory.mktemp("tracked")
    result = run_render("-m", "model=tiny", "steps=2,4", "prompts.limit=2", "seed=[0,1]", cwd=root,
                        env_extra={"OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    (sweep,) = (root / "outputs" / "multirun").glob("*/*")
    db = root / "outputs" / "index.db"
    score([sweep], db, metrics=["psnr", "ssim"])
    return sweep, db


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mlflow server` on a free localhost port (sqlite backend, artefacts served by the server itself)."""
    root = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    log = (root / "server.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}", "--artifacts-destination", str(root / "artefacts")],
        stdout=log, stderr=subprocess.STDOUT, cwd=root)
    uri = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{uri}/health", 180, process)
        yield uri
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def prometheus_problem() -> str | None:
    try:
        with urllib.request.urlopen(f"{PROMETHEUS_URL}/-/ready", timeout=3) as response:
            return None if response.status == 200 else f"{PROMETHEUS_URL}/-/ready answered {response.status}"
    except OSError as exc:
        return f"no Prometheus at {PROMETHEUS_URL} ({exc})"


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A `prometheus` test fails, never skips, without its server: CI must not report green tests it never ran."""
    if item.get_closest_marker("prometheus") and (problem := prometheus_problem()):
        pytest.fail(f"{problem}: install Debian's prometheus and start it with bash .ci/prometheus/up.sh",
                    pytrace=False)


@pytest.fixture
def climbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """(working folder, index) of experiment tiny-demo after two recorded generations, as tests/assess builds them
    (runs written through the contract module, scored for real, decided by `assess climb`)."""
    from click.testing import CliRunner

    from assess.cli import cli
    from tests.assess.climb_fixtures import DemoRuns, hydra_state_kept
    from tests.assess.test_climb_index import first_generation

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HYPERGRID_INDEX", str(tmp_path / "default-index.db"))
    db = tmp_path / "index.db"
    with hydra_state_kept():
        for _ in range(2):
            result = CliRunner().invoke(cli, ["climb", "tiny-demo", "--db", str(db)], catch_exceptions=False)
            assert result.exit_code == 0, result.output
            if _ == 0:
                first_generation(DemoRuns((tmp_path / "outputs").resolve()), db)
        yield tmp_path, db
