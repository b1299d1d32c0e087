"""hydra/launcher=ray against the real local Ray cluster of .ci/ray/up.sh (2 declared GPUs; -m ray): what the other
launchers promise (tests/launchers/test_launchers.py runs its shared sweeps on Ray too), and Ray's own cases: the
same run directories, records and index rows as the gpus launcher, a killed worker retried and resumed, Ctrl-C,
and a detached sweep run as a Ray job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_render
from tests.launchers.test_launchers import LAUNCHERS, cells, no_sample_rendered_twice, the_sweep

pytestmark = pytest.mark.ray

SWEEP = ("-m", "model=tiny", "cache=none,fbcache", "steps=8,16", "prompts.limit=2")


def rendered(root: Path) -> dict[str, list[tuple[str, int, str]]]:
    """Each cell's subfolder -> its samples (prompt id, seed, image digest)."""
    return {run.name: sorted((r["prompt_id"], r["seed"], r["sha256"]) for r in
                             map(json.loads, (run / "samples.jsonl").read_text().splitlines()))
            for run in cells(the_sweep(root))}


def index_rows(root: Path) -> list[tuple]:
    from assess.index.database import Index

    scored = subprocess.run([sys.executable, "-m", "assess", "score", "outputs", "--metrics", "psnr", "-q"], cwd=root,
                            capture_output=True, text=True, timeout=300)
    assert scored.returncode == 0, scored.stderr
    with Index.open(root / "outputs" / "index.db") as index:
        samples = [tuple(r) for r in index.query("SELECT cell_key, prompt_sha, seed, sha256, split FROM samples ORDER BY 1, 2, 3")]
        scores = [tuple(r) for r in index.query("SELECT cell_key, prompt_sha, seed, metric, value FROM scores ORDER BY 1, 2, 3, 4")]
    return samples + scores


@pytest.mark.long("two sweeps (Ray's and the gpus launcher's), each job a fresh worker process, and two scorings")
def test_the_issues_sweep_renders_what_the_gpus_launcher_renders(tiny_cache: Path, tmp_path: Path) -> None:
    """`cache=none,fbcache steps=8,16` through Ray and through the gpus launcher: every cell once, one job per GPU,
    the same run folders, sample records and index rows (pixels to the byte; the jobs' ids and hosts aside)."""
    runs = {}
    for name in ("ray", "gpus"):
        (tmp_path / name).mkdir()
        result = run_render(*SWEEP, *LAUNCHERS[name], cwd=tmp_path / name, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        runs[name] = tmp_path / name
    assert rendered(runs["ray"]) == rendered(runs["gpus"])
    jobs = json.loads((the_sweep(runs["ray"]) / "JOBS.json").read_text())
    assert len(jobs) == 2 and all(j["job_id"].startswith("ray-") for j in jobs)
    placed = {json.loads((Path(c["run_dir"]) / "run.json").read_text())["device"]["cuda_visible_devices"]
              for j in jobs for c in j["cells"]}
    assert placed == {"0", "1"}, placed
    assert index_rows(runs["ray"]) == index_rows(runs["gpus"])


def _wait_for(path: Path, lines: int, process: subprocess.Popen, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        if path.is_file() and path.read_text().count("\n") >= lines:
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} never reached {lines} line(s) (the sweep {'ended' if process.poll() is not None else 'hung'})")


def _a_slow_cell_two_samples_in(tmp_path: Path, launcher: list[str]) -> tuple[subprocess.Popen, Path, int]:
    """A one-cell sweep slow enough to be hit mid-way (300 steps, 8 prompts), once its task has rendered 2 samples:
    the sweep's process, the cell's samples.jsonl and the pid of the worker rendering it."""
    command = [sys.executable, "-m", "render", "-m", "model=tiny", "steps=300", "prompts=dev", "prompts.limit=8",
               "render_anchor=false", *launcher]
    process = subprocess.Popen(command, cwd=tmp_path, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list(tmp_path.glob("outputs/multirun/*/*/*/samples.jsonl")):
        time.sleep(0.2)
    (samples,) = tmp_path.glob("outputs/multirun/*/*/*/samples.jsonl")
    _wait_for(samples, 2, process)
    return process, samples, json.loads((samples.parent / "run.json").read_text())["pid"]


@pytest.mark.long("a cell slow enough to be killed mid-way, then Ray's retry in a fresh worker process")
def test_a_killed_worker_is_retried_and_resumes_sample_by_sample(tiny_cache: Path, tmp_path: Path) -> None:
    """The worker process of a running task is killed (SIGKILL, as the OOM killer or a lost node does): Ray runs the
    task again, which resumes the cell where it stopped; no sample is rendered twice."""
    process, samples, worker = _a_slow_cell_two_samples_in(tmp_path, LAUNCHERS["ray"])
    os.kill(worker, signal.SIGKILL)
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    run = samples.parent
    assert len(no_sample_rendered_twice(run)) == 8 and (run / "DONE.json").exists()
    assert (run / "render.log").read_text().count("loaded model") >= 2, "the task was never run again"


def _raylet_of(pid: int, nodes: list) -> object:
    """The node whose raylet started the worker process `pid` (its ancestor)."""
    import psutil

    raylets = {process.pid: node for node in nodes for name, process in node.live_processes() if name == "raylet"}
    for ancestor in psutil.Process(pid).parents():
        if ancestor.pid in raylets:
            return raylets[ancestor.pid]
    raise AssertionError(f"worker {pid} belongs to no node of the cluster {sorted(raylets)}")


@pytest.mark.long("a cluster of its own (a head and two one-GPU nodes), then a cell slow enough to lose its node")
def test_a_task_whose_node_dies_is_retried_on_another_and_resumes(tiny_cache: Path, tmp_path: Path) -> None:
    """The node running a task is killed (every process of it, as a lost machine): Ray runs the task again on the
    cluster's other node, where the cell resumes where it stopped; no sample is rendered twice. A cluster of its
    own (ray.cluster_utils, other ports than the CI's head): a node of that one cannot be killed alone."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0, "include_dashboard": False})
    try:
        nodes = [cluster.add_node(num_cpus=1, num_gpus=1) for _ in range(2)]
        process, samples, worker = _a_slow_cell_two_samples_in(
            tmp_path, ["hydra/launcher=ray", f"hydra.launcher.address={cluster.address}"])
        cluster.remove_node(_raylet_of(worker, nodes), allow_graceful=False)
        _, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, stderr[-3000:]
    finally:
        cluster.shutdown()
    run = samples.parent
    assert len(no_sample_rendered_twice(run)) == 8 and (run / "DONE.json").exists()
    assert (run / "render.log").read_text().count("loaded model") >= 2, "the task was never run again"
    assert json.loads((run / "run.json").read_text())["pid"] != worker


@pytest.mark.long("two tasks' worker processes started and rendering before the signal")
def test_ctrl_c_cancels_the_tasks_and_their_cells_record_it(tiny_cache: Path, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "render", "-m", "model=tiny", "steps=300,301", "prompts=dev", "prompts.limit=8",
               "render_anchor=false", *LAUNCHERS["ray"]]
    process = subprocess.Popen(command, cwd=tmp_path, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(tmp_path.glob("outputs/multirun/*/*/*/samples.jsonl"))) < 2:
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=180)
    assert process.returncode != 0
    states = {}
    for run in cells(the_sweep(tmp_path)):
        failed = run / "FAILED.json"
        states[run.name] = json.loads(failed.read_text())["category"] if failed.exists() else "done"
    assert set(states.values()) == {"cancelled"}, states
    assert "cancelled" in stderr


def _reservations(root: Path) -> tuple[list, list[dict]]:
    """The experiment's reservations and its spend log's sample lines."""
    from render.laws import Ledger
    from render.laws.admission import reservations
    from render.laws.spend import spend_lines

    ledger = Ledger("tiny-demo", root / "outputs")
    return reservations(ledger), [line for line in spend_lines(ledger) if line.get("what") == "sample"]


@pytest.mark.long("the sweep's driver started by the cluster's job server, then its tasks")
def test_a_detached_sweep_runs_as_a_ray_job_holding_its_reservation_followed_with_assess_status(
        tiny_cache: Path, tmp_path: Path) -> None:
    """`wait=false` submits the sweep's driver as a Ray job and returns: the experiment's budget reservation is held
    for that job (the submitting process is gone), the driver adopts it rather than reserving a second time, every
    sample is spent under it, and it ends with the job."""
    started = time.monotonic()
    result = run_render("-m", "experiment=tiny-demo", "prompts=dev", "prompts.limit=2", "steps=2,3", *LAUNCHERS["ray"],
                        "hydra.launcher.wait=false", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "submitted the sweep as Ray job" in result.stdout and "assess status" in result.stdout
    assert time.monotonic() - started < 120
    (held,), _ = _reservations(tmp_path)
    assert held.ray_jobs and held.live(), "the reservation ended with the submitting process"
    sweep = the_sweep(tmp_path)
    rows: list = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status = subprocess.run([sys.executable, "-m", "assess", "status", str(sweep), "--json"], capture_output=True,
                                text=True)
        found = json.loads(status.stdout) if status.stdout.strip() else []
        rows = found["cells"] if isinstance(found, dict) else found
        if rows and all(r["state"] == "done" for r in rows) and not held.live():
            break
        time.sleep(2)
    assert len(rows) >= 2 and all(r["state"] == "done" for r in rows), rows
    assert len(list(sweep.glob("*/DONE.json"))) == len(rows)  # into this sweep's folder, not a new one
    (after,), spent = _reservations(tmp_path)
    assert after.rid == held.rid and not after.live(), "a second reservation, or one that outlived its job"
    assert spent and {line.get("rid") for line in spent} == {held.rid}


@pytest.mark.long("a generation of the demo climb: its render command's jobs as Ray tasks, then scored")
def test_the_climbs_apply_runs_through_ray_under_its_reservation(tiny_cache: Path, tmp_path: Path) -> None:
    """`assess climb --apply --set hydra/launcher=ray`: the generation's sweep runs as Ray tasks, each worker spending
    under its launch's reservation (inherited through the task's environment), released when the sweep ends."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYPERGRID_INDEX": str(tmp_path / "outputs" / "index.db")}
    climb = subprocess.run([sys.executable, "-m", "assess", "climb", "tiny-demo", "--apply", "--generations", "1",
                            "--set", "hydra/launcher=ray", "--set", "hydra.launcher.address=auto"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert climb.returncode == 0, (climb.stdout + climb.stderr)[-3000:]
    assert "hydra/launcher=ray" in climb.stderr  # the render command it ran
    sweeps = sorted((tmp_path / "outputs" / "multirun").glob("*/*"))
    jobs = [job for sweep in sweeps for job in json.loads((sweep / "JOBS.json").read_text())]
    assert sweeps and jobs and all(j["job_id"].startswith("ray-") for j in jobs)
    reserved, spent = _reservations(tmp_path)
    assert len(reserved) == len(sweeps) and not any(r.live() for r in reserved)  # one a render command, each ended
    workers = {json.loads((Path(c["run_dir"]) / "run.json").read_text())["pid"] for j in jobs for c in j["cells"]}
    assert spent and {line.get("rid") for line in spent} == {r.rid for r in reserved}
    assert {line.get("pid") for line in spent} <= workers, "a sample spent outside the Ray workers"


def _ray_tasks() -> int:
    """How many tasks the cluster has seen (its state API, through the job server)."""
    import urllib.request

    with urllib.request.urlopen("http://127.0.0.1:8265/api/v0/tasks/summarize", timeout=30) as answer:
        summary = json.loads(answer.read())["data"]["result"]["result"]["node_id_to_summary"]["cluster"]["summary"]
    return sum(sum(kind["state_counts"].values()) for kind in summary.values())


@pytest.mark.long("a cell measured in preflight (one sample), then refused")
def test_a_sweep_past_its_budget_is_refused_before_any_task_is_submitted(tiny_cache: Path, tmp_path: Path) -> None:
    before = _ray_tasks()
    result = run_render("-m", "experiment=tiny-demo", "steps=2,4", "prompts=dev", "experiment.budget.gpu_hours=0.00001",
                        "experiment.budget.reserve_gpu_hours=0", *LAUNCHERS["ray"], cwd=tmp_path, timeout=300)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "GPU-hours" in result.stderr and "spent" in result.stderr
    assert not (tmp_path / "outputs" / "multirun").exists() and _ray_tasks() == before
