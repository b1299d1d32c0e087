"""The gpus, slurm and ray launchers run real sweeps of the tiny model: one job per (fake) GPU, each model
loaded once per job, failures isolated, time limits requeued, cancellations recorded, detached runs.

`gpus` runs on any machine with fake GPU ids; `slurm` needs the cluster of .ci/slurm/up.sh (-m slurm), `ray` the
one of .ci/ray/up.sh (-m ray; its own promises: tests/launchers/test_ray.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_render

SLURM = pytest.param("slurm", marks=[pytest.mark.slurm])  # its own tier, once the cluster is up: never also slow
GPUS = pytest.param("gpus", marks=[pytest.mark.slow])
RAY = pytest.param("ray", marks=[pytest.mark.ray])  # likewise its own tier: the local cluster's 2 GPUs
LAUNCHERS = {"gpus": ["hydra/launcher=gpus", "hydra.launcher.gpus=[0,1]"],
             "slurm": ["hydra/launcher=slurm", "hydra.launcher.gpus=2", "hydra.launcher.partition=debug"],
             "ray": ["hydra/launcher=ray", "hydra.launcher.address=auto"]}


def cells(sweep: Path) -> list[Path]:
    return sorted(p for p in sweep.iterdir() if (p / "run.json").exists())


def the_sweep(root: Path) -> Path:
    (sweep,) = list((root / "outputs" / "multirun").glob("*/*"))
    return sweep


@pytest.mark.parametrize("launcher", [GPUS, SLURM, RAY])
def test_six_cells_on_two_gpus_one_job_each_loading_the_model_once(launcher: str, tiny_cache: Path, tmp_path: Path) -> None:
    result = run_render("-m", "model=tiny", "steps=2,3,4", "cache=none,fbcache", "prompts.limit=2", *LAUNCHERS[launcher], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    sweep = the_sweep(tmp_path)
    jobs = json.loads((sweep / "JOBS.json").read_text())
    assert len(jobs) == 2 and sorted(len(j["cells"]) for j in jobs) == [3, 3]
    devices = {}
    for job in jobs:
        seen = {json.loads((Path(c["run_dir"]) / "run.json").read_text())["device"]["cuda_visible_devices"] for c in job["cells"]}
        assert len(seen) == 1, f"a job's cells ran on several GPUs: {seen}"
        devices[job["job_id"]] = seen.pop()
        logs = "".join((Path(c["run_dir"]) / "render.log").read_text() for c in job["cells"])
        assert logs.count("loaded model") == 1, "a job loaded the model more than once"
    assert sorted(devices.values()) == ["0", "1"]
    assert all((c / "DONE.json").exists() for c in cells(sweep))
    assert len(list((tmp_path / "outputs" / "anchors").glob("*/*/*/run.json"))) == 1, "the anchor was rendered twice"
    if launcher != "ray":  # submitit's job files (the pickled cells with their overrides, the logs): this user's only
        assert (sweep / ".submitit").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("launcher", [GPUS, SLURM, RAY])
def test_a_failing_cell_is_isolated_with_its_traceback(launcher: str, tiny_cache: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "model_index.json").write_text('{"_class_name": "FluxPipeline"}')
    result = run_render("-m", "model=tiny", f"model.id=hypergrid:tiny,{broken}", "steps=2,3", "prompts.limit=1", "render_anchor=false",
                        *LAUNCHERS[launcher], cwd=tmp_path)
    assert result.returncode == 1
    assert "2 of 4 cells failed" in result.stderr and str(broken).split("/")[-1] in result.stderr
    failed = [json.loads((c / "FAILED.json").read_text()) for c in cells(the_sweep(tmp_path)) if (c / "FAILED.json").exists()]
    assert len(failed) == 2 and all(f["category"] == "error" and "Traceback" in f["traceback"] for f in failed)
    assert sum((c / "DONE.json").exists() for c in cells(the_sweep(tmp_path))) == 2


def the_width_2_cell_and_its_parity(sweep: Path, db: Path, launcher: str, wide_gpus: str | None) -> dict[str, Path]:
    """Issue 33's promises on a finished sweep `parallel=none,ulysses`: the Ulysses cell held two GPUs (`wide_gpus`,
    where a launcher gave it GPUs of its own; its ranks run as gloo processes on the CPU), its width-1 twin is the
    sweep's own `none` cell, and scoring records the pixel drift between them. Returns the cells by their override."""
    from assess.index.database import Index
    from assess.statistics.parity import drifting

    runs = {next(o for o in json.loads((c / "run.json").read_text())["overrides"] if o.startswith("parallel=")): c
            for c in cells(sweep)}
    assert all((c / "DONE.json").exists() for c in runs.values()), f"{launcher}: every cell of the sweep is done: {runs}"
    wide, narrow = (json.loads((runs[f"parallel={p}"] / "run.json").read_text()) for p in ("ulysses", "none"))
    if wide_gpus is not None:
        assert wide["device"]["cuda_visible_devices"] == wide_gpus, \
            f"{launcher}: the width-2 cell holds two GPUs of its own ({wide_gpus}): {wide['device']}"
    sample = json.loads((runs["parallel=ulysses"] / "samples.jsonl").read_text().splitlines()[-1])
    assert sample["gpus"] == 2, f"{launcher}: the width-2 cell's samples record their two GPUs: {sample}"
    scored = subprocess.run([sys.executable, "-m", "assess", "score", str(sweep), "--db", str(db), "--metrics", "psnr",
                             "-q"], capture_output=True, text=True)
    assert scored.returncode == 0, scored.stderr[-3000:]
    with Index.open(db) as index:
        rows = index.parity(wide["cell_key"])
    assert len(rows) == 1 and rows[0]["twin_cell_key"] == narrow["cell_key"], \
        f"{launcher}: scoring records the width-2 cell's parity against its width-1 twin, the sweep's none cell: {rows}"
    (row,) = rows
    assert row["max_levels"] <= 1 and row["ssim"] > 0.999 and drifting([row]) is None, \
        f"{launcher}: the width-2 cell renders like its width-1 twin (no drift): {dict(row)}"
    return runs


@pytest.mark.parametrize("launcher", [pytest.param("inprocess", marks=[pytest.mark.slow]), SLURM, RAY])
def test_a_width_2_cell_is_placed_on_two_gpus_and_its_parity_against_width_1_recorded(launcher: str, tiny_cache: Path,
                                                                                        tmp_path: Path) -> None:
    """The issue-33 sweep `parallel=none,ulysses` through each launcher the tests can run (the gpus launcher's is
    test_the_gpus_launcher_runs_a_width_1_and_a_width_2_cell_side_by_side_on_three_gpus, on three GPUs)."""
    result = run_render("-m", "model=tiny", "parallel=none,ulysses", "prompts.limit=1", "render_anchor=false",
                        *LAUNCHERS.get(launcher, []), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    the_width_2_cell_and_its_parity(the_sweep(tmp_path), tmp_path / "index.db", launcher,
                                    None if launcher == "inprocess" else "0,1")


@pytest.mark.slow
def test_the_gpus_launcher_runs_a_width_1_and_a_width_2_cell_side_by_side_on_three_gpus(tiny_cache: Path,
                                                                                       tmp_path: Path) -> None:
    """One sweep, two promises (each was a gpus sweep of its own, about 20 s each): the width-1 and the width-2 cell
    run side by side, each in a job of its own (before, both ran one after the other in one slot of (0, 1), and GPU 2
    stayed idle); and issue 33's promises for the gpus launcher (the width-2 cell on two GPUs of its own, its parity
    against its width-1 twin recorded)."""
    result = run_render("-m", "model=tiny", "parallel=none,ulysses", "prompts.limit=1", "render_anchor=false",
                        "hydra/launcher=gpus", "hydra.launcher.gpus=[0,1,2]", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = json.loads((the_sweep(tmp_path) / "JOBS.json").read_text())
    assert [len(job["cells"]) for job in jobs] == [1, 1], f"side by side: one job a cell: {jobs}"
    placed = {}
    for job in jobs:
        (only,) = job["cells"]
        run = json.loads((Path(only["run_dir"]) / "run.json").read_text())
        placed[run["device"]["cuda_visible_devices"]] = next(o for o in run["overrides"] if o.startswith("parallel="))
    assert placed == {"0,1": "parallel=ulysses", "2": "parallel=none"}, \
        f"side by side: the width-2 cell on GPUs 0,1 and the width-1 cell on GPU 2 at once: {placed}"
    the_width_2_cell_and_its_parity(the_sweep(tmp_path), tmp_path / "index.db", "gpus", "0,1")


def no_sample_rendered_twice(run: Path) -> list[tuple[str, int]]:
    rendered = [(r["prompt_id"], r["seed"]) for r in map(json.loads, (run / "samples.jsonl").read_text().splitlines())
                if r["reused_from"] is None]
    assert len(rendered) == len(set(rendered)), "a sample was rendered twice"
    return rendered


REQUEUE_PROMPTS = "suite-dev"  # 216 prompts x 2 seeds: room for a minute and more of work on a fast machine


def samples_for(seconds: float, steps: int, cwd: Path) -> int:
    """How many samples take about `seconds` to render here (measured, since CI and laptops differ; at most what
    the prompts hold, so `steps` must make a sample slow enough on a fast machine)."""
    probe = run_render("model=tiny", "steps=%d" % steps, f"prompts={REQUEUE_PROMPTS}", "prompts.limit=4",
                       "render_anchor=false", "out_root=probe", cwd=cwd)
    assert probe.returncode == 0, probe.stderr[-2000:]
    (run,) = [p.parent for p in (cwd / "probe").rglob("samples.jsonl")]
    latencies = [r["latency_s"] for r in map(json.loads, (run / "samples.jsonl").read_text().splitlines()) if not r["warmup"]]
    # the fastest sample, not the mean: a probe slowed by a neighbouring test would otherwise size work that a job
    # running alone finishes in half the time (one attempt, no requeue: the flake this replaced)
    return max(8, min(432, int(seconds / min(latencies))))


# (launcher, time limit in minutes, checkpoint signal seconds before it, seconds of work at the probe's fastest).
# SLURM checks limits about every 30 s, so a signal 55 s before a 1-minute limit lands 5-35 s into the job (its
# start and model load included), later on a loaded machine: 75 s of work never fits one attempt, and once SLURM
# has requeued the job the test widens the requeued job's limit to 5 minutes, so the second attempt always
# finishes (without that, a second signal landing 5 s in made a third attempt in one run of two). submitit's local
# controller signals on time, so a 1-minute limit with the signal 40 s before it leaves each attempt 20 s: 20 s of
# work never fits one (its start and model load come first), and what the first attempt leaves fits the second.
REQUEUE = [pytest.param("gpus", 1, 40, 20, marks=[pytest.mark.slow, pytest.mark.long("a real time limit twice")]),
           pytest.param("slurm", 1, 55, 75, marks=[*SLURM.marks, pytest.mark.long("SLURM's real time limit, requeue "
                                                                                     "and its 10 s eligibility delay")])]
REQUEUE_STEPS = 300  # about a second a sample on a quiet 2-core machine: the work is never capped below one attempt


def widen_the_limit_once_requeued(process: subprocess.Popen, sweep_root: Path, minutes: int = 5) -> None:
    """Wait for SLURM to requeue the sweep's one job after its real time limit, then give the next attempt
    `minutes` (root may raise a limit): the first attempt is the real time-out, the second one finishes."""
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        jobs = list(sweep_root.glob("outputs/multirun/*/*/JOBS.json"))
        if jobs:
            (job,) = json.loads(jobs[0].read_text())
            shown = subprocess.run(["scontrol", "-o", "show", "job", job["job_id"]], capture_output=True, text=True).stdout
            if "Restarts=0" not in shown and "Restarts=" in shown:
                update = subprocess.run(["scontrol", "update", f"JobId={job['job_id']}", f"TimeLimit={minutes}"],
                                        capture_output=True, text=True)
                assert update.returncode == 0, f"scontrol could not widen the requeued job's limit: {update.stderr}"
                return
        time.sleep(0.5)
    raise AssertionError("SLURM never requeued the job after its time limit")


@pytest.mark.parametrize("launcher,limit_min,signal_s,work_s", REQUEUE)
def test_a_job_past_its_time_limit_is_requeued_and_finishes(launcher: str, limit_min: int, signal_s: int, work_s: int,
                                                            tiny_cache: Path, tmp_path: Path) -> None:
    """More work than one attempt can do: the job is requeued, and no attempt renders a sample twice."""
    n = samples_for(work_s, REQUEUE_STEPS, tmp_path)
    command = [sys.executable, "-m", "render", "-m", "model=tiny", f"steps={REQUEUE_STEPS}", f"prompts={REQUEUE_PROMPTS}",
               f"prompts.limit={(n + 1) // 2}", "seed=[0,1]", "render_anchor=false", *LAUNCHERS[launcher],
               f"hydra.launcher.timeout_min={limit_min}", f"hydra.launcher.signal_delay_s={signal_s}",
               "hydra.launcher.max_num_timeout=12"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "0"}
    with (tmp_path / "stderr.txt").open("w") as stderr:  # a file, not a pipe nobody reads while the sweep runs
        process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
        if launcher == "slurm":
            widen_the_limit_once_requeued(process, tmp_path)
        process.wait(timeout=1500)
    assert process.returncode == 0, (tmp_path / "stderr.txt").read_text()[-3000:]
    (run,) = cells(the_sweep(tmp_path))
    done = json.loads((run / "DONE.json").read_text())
    expected = 2 * ((n + 1) // 2)
    assert len(no_sample_rendered_twice(run)) == expected and done["n_samples"] == expected
    # each attempt starts with the cell's line (what it will render); its model load may not come before the signal:
    # SLURM's can land while a loaded machine is still importing (then the first attempt never loaded the model)
    assert (run / "render.log").read_text().count(" to render") >= 2, "the job was never requeued"


@pytest.mark.slurm
def test_scancel_marks_the_cells_cancelled_and_the_command_returns(tiny_cache: Path, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "render", "-m", "model=tiny", "steps=200,201", "prompts=dev", "render_anchor=false", *LAUNCHERS["slurm"]]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(tmp_path.glob("outputs/multirun/*/*/*/samples.jsonl")):
        time.sleep(0.5)
    jobs = json.loads(next(tmp_path.glob("outputs/multirun/*/*/JOBS.json")).read_text())
    subprocess.run(["scancel", *[j["job_id"] for j in jobs]], check=True)
    _, stderr = process.communicate(timeout=180)
    assert process.returncode == 1
    categories = [json.loads((c / "FAILED.json").read_text())["category"] for c in cells(the_sweep(tmp_path))]
    assert categories and set(categories) == {"cancelled"}, categories
    assert "cancelled" in stderr


@pytest.mark.slurm
def test_detached_submission_is_followed_with_assess_status(tiny_cache: Path, tmp_path: Path) -> None:
    started = time.monotonic()
    result = run_render("-m", "model=tiny", "steps=2,3", "prompts.limit=2", *LAUNCHERS["slurm"], "hydra.launcher.wait=false", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "submitted 2 job(s)" in result.stdout and "assess status" in result.stdout
    sweep = the_sweep(tmp_path)
    deadline = started + 180
    while time.monotonic() < deadline:
        status = subprocess.run([sys.executable, "-m", "assess", "status", str(sweep), "--json"], capture_output=True, text=True)
        rows = json.loads(status.stdout)
        rows = rows["cells"] if isinstance(rows, dict) else rows
        if rows and all(r["state"] == "done" for r in rows):
            break
        time.sleep(2)
    assert rows and all(r["state"] == "done" for r in rows), rows


@pytest.mark.slow
@pytest.mark.parametrize("address,says", [("127.0.0.1:1", "nothing answers at 127.0.0.1:1"),
                                          ("ray://127.0.0.1:1", "nothing answers at 127.0.0.1:1"),
                                          ("nonsense", "'nonsense' is not an address: give auto, host:port"),
                                          ("", "hydra.launcher.address='': empty (a variable that is not set?)")])
def test_a_ray_address_nothing_answers_at_is_refused_at_once_before_anything_is_written(address: str, says: str,
                                                                                        tmp_path: Path) -> None:
    """Ray retries an unreachable cluster for minutes: the launcher's preflight answers in seconds, exit 2."""
    started = time.monotonic()
    result = run_render("-m", "model=tiny", "steps=2,3", "hydra/launcher=ray", f"hydra.launcher.address={address}",
                        cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and says in result.stderr and "nothing was submitted" in result.stderr, result.stderr
    assert time.monotonic() - started < 60 and not (tmp_path / "outputs" / "multirun").exists()
