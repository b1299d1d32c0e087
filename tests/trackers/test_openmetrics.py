"""Live metrics: `assess status --openmetrics`, `--textfile`, `--serve`, and a launch's `metrics.port` /
`metrics.textfile`, read back with prometheus-client's own parser and compared with `assess status`."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from assess.export.openmetrics import serve
from assess.status import STATES, status
from render import rundir
from tests.assess.conftest import RunFactory, make_cell
from tests.conftest import run_render
from tests.trackers.conftest import free_port, wait_for


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def samples_of(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(metric name, sorted labels) -> value, parsed by prometheus-client's own text parser."""
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def timeless(parsed: dict) -> dict:
    """Without the running cell's ETA, which moves with the clock between two reads."""
    return {k: v for k, v in parsed.items() if k[0] != "hypergrid_cell_eta_seconds"}


def value(parsed: dict, name: str, **labels: str) -> float:
    return parsed[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def mixed_sweep(tmp_path: Path) -> Path:
    """A sweep with a done cell, a failed one, a running one the watchdog flags slow, and a pending one; the
    runs belong to an experiment with a budget."""
    outputs = RunFactory(tmp_path / "outputs")
    sweep = outputs.sweep(cells=[{"num": 0, "overrides": ["steps=8"]}, {"num": 1, "overrides": ["steps=4"]},
                                 {"num": 2, "overrides": ["steps=2"]}, {"num": 3, "overrides": ["steps=1"]}])
    outputs.run(sweep, "0_steps=8", make_cell(steps=8), overrides=["steps=8"])
    outputs.run(sweep, "1_steps=4", make_cell(steps=4), overrides=["steps=4"], terminal="failed", n_done=3)
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")  # after this process started: its pid is alive
    running = outputs.run(sweep, "2_steps=2", make_cell(steps=2), overrides=["steps=2"], terminal=None, n_done=3,
                          pid=os.getpid(), started_at=now)
    samples = running / rundir.SAMPLES  # its samples finished after it started (the fixture dates them earlier)
    samples.write_text(samples.read_text().replace("2026-11-30T10:04:14+00:00", now))
    experiment = {"name": "budgeted", "budget": {"gpu_hours": 0.5, "reserve_gpu_hours": 0.1}}
    for run in sweep.glob("[0-9]_*"):
        record = json.loads((run / rundir.RUN_JSON).read_text())
        record["config"] = {"experiment": experiment}
        if run == running:
            record["estimate"] = {"n_pending": 1000, "s_per_sample": 0.01}  # a tenth of its pace: slow
        rundir.atomic_write_json(run / rundir.RUN_JSON, record)
    return sweep


def test_openmetrics_says_what_status_says(mixed_sweep: Path) -> None:
    result = invoke("status", str(mixed_sweep), "--openmetrics")
    assert result.exit_code == 0, result.output
    parsed = samples_of(result.output)
    rows = status(mixed_sweep)
    sweep = str(mixed_sweep.resolve())
    assert {s: value(parsed, "hypergrid_cells", sweep=sweep, state=s) for s in STATES} == \
        {s: float(sum(r.state == s for r in rows)) for s in STATES}
    assert [value(parsed, "hypergrid_cells", sweep=sweep, state=s) for s in ("done", "failed", "running", "pending")] \
        == [1, 1, 1, 1]
    assert value(parsed, "hypergrid_samples_done", sweep=sweep) == sum(r.n_done for r in rows) == 8 + 3 + 3
    assert value(parsed, "hypergrid_cells_slow", sweep=sweep) == 1
    running = next(r for r in rows if r.state == "running")
    assert running.slow
    labels = {"sweep": sweep, "cell": running.name, "cell_key": running.cell_key}
    assert value(parsed, "hypergrid_cell_slow", **labels) == 1
    assert value(parsed, "hypergrid_cell_state", **labels, state="running") == 1
    assert value(parsed, "hypergrid_cell_state", **labels, state="done") == 0
    from render.laws import Ledger
    from render.laws.admission import spent_gpu_seconds

    spent = spent_gpu_seconds(Ledger("budgeted", mixed_sweep.parents[2]))
    assert spent > 0
    assert value(parsed, "hypergrid_experiment_gpu_seconds_spent", experiment="budgeted") == pytest.approx(spent)
    assert value(parsed, "hypergrid_experiment_gpu_seconds_budget", experiment="budgeted") == 1800
    assert value(parsed, "hypergrid_experiment_gpu_seconds_reserve", experiment="budgeted") == 360


def test_the_textfile_is_the_same_text_and_bad_names_are_exit_2(mixed_sweep: Path, tmp_path: Path) -> None:
    target = tmp_path / "hypergrid.prom"
    assert invoke("status", str(mixed_sweep), "--textfile", str(target)).exit_code == 0
    assert timeless(samples_of(target.read_text())) == \
        timeless(samples_of(invoke("status", str(mixed_sweep), "--openmetrics").output))
    wrong = invoke("status", str(mixed_sweep), "--textfile", str(tmp_path / "hypergrid.txt"))
    assert wrong.exit_code == 2 and "reads only *.prom files" in wrong.output
    nowhere = invoke("status", str(mixed_sweep), "--textfile", str(tmp_path / "missing" / "h.prom"))
    assert nowhere.exit_code == 2 and "does not exist" in nowhere.output
    assert not (tmp_path / "hypergrid.txt").exists()


def test_serve_answers_scrapes_and_a_taken_port_is_exit_2(mixed_sweep: Path, tmp_path: Path) -> None:
    port, stop = free_port(), threading.Event()
    textfile = tmp_path / "served.prom"
    thread = threading.Thread(target=serve, args=(mixed_sweep, port, "127.0.0.1", textfile, 0.2),
                              kwargs={"log": lambda line: None, "stop": stop})
    thread.start()
    try:
        wait_for(f"http://127.0.0.1:{port}/metrics", 30)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            served = samples_of(response.read().decode())
        assert value(served, "hypergrid_cells", sweep=str(mixed_sweep.resolve()), state="failed") == 1
        taken = invoke("status", str(mixed_sweep), "--serve", "--port", str(port))
        assert taken.exit_code == 2 and f"cannot serve metrics on 127.0.0.1:{port}" in taken.output
    finally:
        stop.set()
        thread.join(timeout=30)
    assert timeless(samples_of(textfile.read_text())) == timeless(served)  # written on the way out too


def test_an_empty_output_root_is_served_and_a_missing_one_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    once = invoke("status", str(tmp_path / "empty"), "--openmetrics")
    assert once.exit_code == 1 and "Error:" in once.output  # printing once: nothing to print is the user's error
    port, stop = free_port(), threading.Event()
    thread = threading.Thread(target=serve, args=(tmp_path / "empty", port), kwargs={"log": lambda line: None,
                                                                                      "stop": stop})
    thread.start()
    try:
        wait_for(f"http://127.0.0.1:{port}/metrics", 30)  # serving before the first sweep starts: empty, not an error
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            assert not [k for k in samples_of(response.read().decode()) if k[0] == "hypergrid_cells"]
    finally:
        stop.set()
        thread.join(timeout=30)
    missing = invoke("status", str(tmp_path / "nope"), "--serve", "--port", str(free_port()))
    assert missing.exit_code == 2 and "no such folder to serve" in missing.output


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.mark.slow
def test_a_launch_that_asks_for_metrics_gets_them_while_it_runs(tiny_cache: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    port, textfile = free_port(), tmp_path / "sweep.prom"
    process = subprocess.Popen(
        [sys.executable, "-m", "render", "-m", "model=tiny", "steps=2,3", "prompts.limit=4", f"metrics.port={port}",
         f"metrics.textfile={textfile}", "metrics.interval_s=0.2"],
        cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen: list[dict] = []
    try:
        while process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                    seen.append(samples_of(response.read().decode()))
            except OSError:
                pass
            time.sleep(0.2)
    finally:
        _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-3000:]
    (sweep,) = (tmp_path / "outputs" / "multirun").glob("*/*")
    assert seen, "the sweep's exporter never answered while it ran"
    assert all(value(s, "hypergrid_cells", sweep=str(sweep), state="pending") +
               sum(value(s, "hypergrid_cells", sweep=str(sweep), state=st) for st in ("done", "running")) == 2
               for s in seen)
    final = samples_of(textfile.read_text())  # the exporter's last write, on its way out
    assert value(final, "hypergrid_cells", sweep=str(sweep), state="done") == 2
    assert value(final, "hypergrid_samples_done", sweep=str(sweep)) == 8
    assert not _listening(port)  # stopped with the sweep


@pytest.mark.slow
def test_metrics_a_launch_cannot_provide_are_refused_at_preflight(tiny_cache: Path, tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        taken = run_render("-m", "model=tiny", "steps=2", f"metrics.port={port}", cwd=tmp_path)
    assert taken.returncode == 2
    assert f"metrics.port={port}: cannot listen on 127.0.0.1:{port}" in taken.stderr
    assert "nothing was launched" in taken.stderr and not (tmp_path / "outputs" / "multirun").exists()
    single = run_render("model=tiny", "metrics.textfile=x.prom", cwd=tmp_path)
    assert single.returncode == 2 and "live metrics follow a sweep; launch with -m" in single.stderr
    wrong = run_render("-m", "model=tiny", "steps=2", f"metrics.textfile={tmp_path}/none/x.prom", cwd=tmp_path)
    assert wrong.returncode == 2 and "does not exist" in wrong.stderr
    assert not (tmp_path / "outputs" / "runs").exists() and not (tmp_path / "outputs" / "multirun").exists()
