"""Secrets stay with the process that needs them, on every launcher (issue 61, principle 5): the SLURM launcher's
sbatch inherited the launching shell's whole environment (HF_TOKEN and a hub endpoint's password among it), which
SLURM keeps with the job (`sacct --env-vars` on a cluster that stores job environments), and submitit's job files (the
pickled cells with their overrides, the scripts, the logs) were as readable as the sweep folder; the gpus launcher's
controller process held them in its environment too. Now every launcher hands them through the one file of
render.run.secrets, and the engine's submission never sees them.

These run in the default tier without a cluster: submitit's own SlurmExecutor writes its files and calls an `sbatch`
that records what it is handed (the scheduler is the only part left out), and the gpus launcher starts its real
submitit job (a worker that reports the credential it reads)."""

from __future__ import annotations

import json
import os
import pickle
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from hydra_plugins.hypergrid.placement import CellSpec

TOKEN = "hf_hypergridNotARealToken61"
PASSWORD = "hubPassw0rd61"
SECRET_ENV = {"HF_TOKEN": TOKEN, "HF_ENDPOINT": f"https://reader:{PASSWORD}@127.0.0.1:9"}
SECRET_OVERRIDE = f"tag=https://reader:{PASSWORD}@hub.example"

FAKE_SBATCH = """#!/bin/sh
for last; do :; done
env > "{out}/sbatch.env"
echo "$@" > "{out}/sbatch.args"
cat "$last" > "{out}/sbatch.script"
echo "Submitted batch job 4242"
"""


class _ReportingLoader:
    """A job's config loader that writes the credential its worker process sees, then stops the job."""

    def __init__(self, out: str) -> None:
        self.out = out

    def load_sweep_config(self, config: Any, overrides: list[str]) -> Any:
        Path(self.out).write_text(os.environ.get("HF_TOKEN", "(none)"))
        raise RuntimeError("reported")


class _Context:
    def __init__(self, out: str) -> None:
        self.config_loader, self.callbacks = _ReportingLoader(out), None


def _task(cfg: Any) -> None:
    pass


def _launcher(kind: str, sweep: Path, report: Path) -> Any:
    from hydra_plugins.hypergrid.config import GpusLauncherConf, SlurmLauncherConf
    from hydra_plugins.hypergrid.gpus import GpusLauncher
    from hydra_plugins.hypergrid.slurm import SlurmLauncher

    conf, cls = {"slurm": (SlurmLauncherConf, SlurmLauncher), "gpus": (GpusLauncherConf, GpusLauncher)}[kind]
    params = {k: v for k, v in OmegaConf.to_container(OmegaConf.structured(conf)).items() if k != "_target_"}
    params.update(submitit_folder=f"{sweep}/.submitit/%j", timeout_min=5, name="render")
    if kind == "gpus":
        params["gpus"] = [0]
    launcher = cls(**params)
    launcher.config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}})
    launcher.hydra_context, launcher.task_function = _Context(str(report)), _task
    return launcher


@pytest.fixture
def secrets_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)


def _cells(sweep: Path) -> list[CellSpec]:
    return [CellSpec(("steps=2", SECRET_OVERRIDE), 0, sweep / "0", "tiny", 2, 1)]


def _leaks(text: str) -> list[str]:
    return [s for s in (TOKEN, PASSWORD) if s in text]


def _private(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) == 0o700


def test_sbatch_is_handed_no_credential_and_submitits_job_files_are_private(
        secrets_set: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra_plugins.hypergrid.worker import JOB_ID_ENV

    bin_dir, out, sweep = tmp_path / "bin", tmp_path / "seen", tmp_path / "sweep"
    for folder in (bin_dir, out, sweep):
        folder.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH.format(out=out))
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho 'MaxArraySize = 1001'\n")  # the cluster's answer, at once
    for command in ("sbatch", "scontrol"):
        (bin_dir / command).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    launcher = _launcher("slurm", sweep, out / "report")
    submitted = launcher.submit_privately(_cells(sweep), sweep)
    assert [str(job.job_id) for job, _ in submitted] == ["4242"]
    seen = {name: (out / f"sbatch.{name}").read_text() for name in ("env", "args", "script")}
    assert {name: _leaks(text) for name, text in seen.items()} == {"env": [], "args": [], "script": []}
    assert "HF_TOKEN" not in seen["env"] and "PATH=" in seen["env"], "sbatch is handed the plain environment"
    assert os.environ["HF_TOKEN"] == TOKEN, "the launching shell keeps its own environment"
    assert _private(sweep / ".submitit"), "submitit's job files (the pickled cells, their overrides) are private"
    assert _leaks((sweep / "JOBS.json").read_text()) == []
    handed = launcher.handed.file
    assert handed is not None and stat.S_IMODE(handed.stat().st_mode) == 0o600 and _private(handed.parent)
    (pickled,) = list((sweep / ".submitit").rglob("*_submitted.pkl"))
    _worker_entry_point_only(monkeypatch)
    batch = pickle.loads(pickled.read_bytes()).function  # what the job runs, as submitit's worker loads it
    batch.cells = []
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv(JOB_ID_ENV, "4242_0")
    batch()
    assert os.environ["HF_TOKEN"] == TOKEN, "the job reads its credentials from the file the launcher wrote"


def test_the_gpus_launchers_job_gets_its_credentials_through_the_file_not_its_controllers_environment(
        secrets_set: None, tmp_path: Path) -> None:
    sweep, report = tmp_path / "sweep", tmp_path / "report"
    sweep.mkdir()
    launcher = _launcher("gpus", sweep, report)
    ((job, _),) = launcher.submit_privately(_cells(sweep), sweep)
    process = job._process
    controller = Path(f"/proc/{process.pid}")
    seen = (controller / "environ").read_bytes().decode(errors="replace") + (controller / "cmdline").read_bytes().decode(errors="replace")
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _leaks(seen) == [], "the job's controller process holds a credential in its environment or command line"
    assert report.read_text() == TOKEN, "the job's worker reads its credentials from the launcher's file"
    assert _private(sweep / ".submitit")
    logs = "".join(p.read_text(errors="replace") for p in (sweep / ".submitit").rglob("*") if p.is_file()
                   and p.suffix in (".out", ".err"))
    assert _leaks(logs) == []
    assert json.loads(launcher.handed.file.read_text())["env"]["HF_TOKEN"] == TOKEN


def _worker_entry_point_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch run in this test process installs nothing process-wide: its third-party filters and the redacting log
    factory are a worker's, an entry point's (tests/test_quiet.py sees every warning as Python shows it)."""
    monkeypatch.setattr("render.run.quiet.filter_third_party_warnings", lambda: None)
    monkeypatch.setattr("render.rundir.redact.install", lambda: None)
