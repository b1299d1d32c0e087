"""Issue 29: faults and odd inputs end in one line: a file given as a folder, a full disk while scoring, a NaN in
an experiment; the servers stop cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from tests.assess.conftest import RunFactory, make_cell, shift


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize("command", ["score", "status"])
def test_a_file_given_as_a_folder_is_named_a_file(outputs: RunFactory, db: Path, command: str) -> None:
    sweep = outputs.sweep()
    run = outputs.anchor(sweep)
    result = invoke(command, str(run / "run.json"), *(["--db", str(db)] if command == "score" else []))
    assert result.exit_code == 1
    assert f"{run / 'run.json'} is a file, not a folder" in result.output and f"its run directory: {run}" in result.output


def _fill(disk: Path) -> None:
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


@pytest.mark.slow
def test_a_full_disk_while_scoring_is_one_line_and_the_index_intact(outputs: RunFactory, small_disk: Path) -> None:
    db = small_disk / "index.db"
    sweep = outputs.sweep()
    outputs.anchor(sweep)
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(3))
    first = subprocess.run([sys.executable, "-m", "assess", "score", str(sweep), "--db", str(db), "--metrics", "psnr",
                            "-q"], capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    _fill(small_disk)
    for n in range(2, 30):
        outputs.run(sweep, f"{n}_steps={n + 8}", make_cell(steps=n + 8), overrides=[f"steps={n + 8}"], perturb=shift(3))
    result = subprocess.run([sys.executable, "-m", "assess", "score", str(sweep), "--db", str(db), "--metrics",
                             "psnr,ssim"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "disk is full" in result.stderr
    (small_disk / "filler").unlink()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (2,)
    finally:
        conn.close()


@pytest.mark.parametrize("override", ["experiment.quality.band=nan", "experiment.budget.gpu_hours=nan",
                                      "experiment.budget.gpu_hours=inf"])
def test_an_experiment_with_a_nan_number_is_refused(override: str) -> None:
    from assess.experiment import experiment_names, load_experiment
    from assess.errors import AssessError

    name = sorted(experiment_names())[0]
    with pytest.raises(AssessError, match=rf"{override.split('=')[0]}=(nan|inf): must be a finite number"):
        load_experiment(name, (override,))


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in found]


@pytest.mark.slow
def test_assess_ui_stops_on_sigterm_and_leaves_no_child_nor_temporary_file(outputs: RunFactory, db: Path,
                                                                           tmp_path: Path) -> None:
    pytest.importorskip("datasette")
    from assess.scoring.ingest import score
    from tests.trackers.conftest import free_port

    sweep = outputs.sweep()
    outputs.anchor(sweep)
    score([sweep], db, metrics=["psnr"])
    temp = tmp_path / "tmp"
    temp.mkdir()
    port = free_port()
    # the venv's python, not activated: datasette is this interpreter's, whatever PATH holds
    process = subprocess.Popen([sys.executable, "-m", "assess", "ui", "--db", str(db), "--port", str(port)],
                               env={**os.environ, "TMPDIR": str(temp), "PATH": "/usr/bin:/bin"},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    children: list[int] = []
    while time.monotonic() < deadline and not children:
        children = _children(process.pid)
        time.sleep(0.2)
    assert children, "datasette did not start"
    listening = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True).stdout
    deadline = time.monotonic() + 60
    while f":{port} " not in listening and time.monotonic() < deadline:
        time.sleep(0.3)
        listening = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True).stdout
    assert f"127.0.0.1:{port} " in listening  # loopback unless told otherwise
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 128 + signal.SIGTERM
    time.sleep(0.5)
    assert not [c for c in children if os.path.exists(f"/proc/{c}")]
    assert not list(temp.iterdir())
    with sqlite3.connect(db) as check:
        assert check.execute("select count(*) from runs").fetchone()[0] > 0, "the index it served is untouched"


@pytest.mark.slow
def test_status_serve_stops_on_sigterm_and_binds_loopback(outputs: RunFactory, tmp_path: Path) -> None:
    pytest.importorskip("prometheus_client")
    from tests.trackers.conftest import free_port

    sweep = outputs.sweep()
    outputs.anchor(sweep)
    port = free_port()
    textfile = tmp_path / "metrics.prom"
    process = subprocess.Popen([sys.executable, "-m", "assess", "status", str(sweep), "--serve", "--port", str(port),
                                "--textfile", str(textfile), "--interval", "0.2"], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    listening = ""
    while f":{port} " not in listening and time.monotonic() < deadline:
        time.sleep(0.3)
        listening = subprocess.run(["ss", "-ltn"], capture_output=True, text=True).stdout
    assert f"127.0.0.1:{port} " in listening
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert not _children(process.pid)
    assert not [p.name for p in tmp_path.iterdir() if p.name not in ("metrics.prom", "outputs")]  # no temporary file


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _burst_then_exit_s(command: list[str], port: int, signum: int, delay_s: float) -> tuple[int, float]:
    """Start the server, wait for its port, send 20 `signum` 1 ms apart after `delay_s`: (exit code, seconds to exit)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not _listening(port):
            assert process.poll() is None and time.monotonic() < deadline, "the server did not open its port"
            time.sleep(0.01)
        time.sleep(delay_s)
        for _ in range(20):
            process.send_signal(signum)
            time.sleep(0.001)
        sent = time.monotonic()
        code = process.wait(timeout=10)
        return code, time.monotonic() - sent
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_status_serve_stops_within_2_s_of_a_burst_of_signals(outputs: RunFactory, tmp_path: Path,
                                                               signum: int) -> None:
    pytest.importorskip("prometheus_client")
    from tests.trackers.conftest import free_port

    sweep = outputs.sweep()
    outputs.anchor(sweep)
    textfile = tmp_path / "metrics.prom"
    for delay_s in (0.0, 0.05, 0.2, 0.35):  # right as the port opens, and while the loop waits or writes
        port = free_port()
        command = [sys.executable, "-m", "assess", "status", str(sweep), "--serve", "--port", str(port),
                   "--textfile", str(textfile), "--interval", "0.1"]
        textfile.unlink(missing_ok=True)
        code, exit_s = _burst_then_exit_s(command, port, signum, delay_s)
        assert (code, exit_s < 2) == (0, True), f"delay {delay_s}: exit {code} after {exit_s:.1f} s"
        assert not _listening(port) and "hypergrid_cells" in textfile.read_text()  # the last state, written


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_assess_ui_stops_within_2_s_of_a_burst_of_signals(outputs: RunFactory, db: Path, tmp_path: Path,
                                                           signum: int) -> None:
    pytest.importorskip("datasette")
    from assess.scoring.ingest import score
    from tests.trackers.conftest import free_port

    sweep = outputs.sweep()
    outputs.anchor(sweep)
    score([sweep], db, metrics=["psnr"])
    for delay_s in (0.0, 0.2, 0.5):
        port = free_port()
        command = [sys.executable, "-m", "assess", "ui", "--db", str(db), "--port", str(port)]
        code, exit_s = _burst_then_exit_s(command, port, signum, delay_s)
        assert (code, exit_s < 2) == (128 + signum, True), f"delay {delay_s}: exit {code} after {exit_s:.1f} s"
        assert not _listening(port)


MODEL_OPTIONS = {"pickscore": ["--metric-model", "pickscore={}"], "cmmd": ["--metric-model", "cmmd={}"],
                 "clip_score": ["--clip-model", "{}"], "imagereward": ["--metric-model", "imagereward={}"]}


def _wrong_folder(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / kind
    if kind == "missing":
        return tmp_path / "nonexistent" / "P"
    folder.mkdir()
    if kind == "bert":
        (folder / "config.json").write_text('{"model_type": "bert"}')
    if kind == "unreadable":
        folder.chmod(0)
        if os.access(folder, os.R_OK):  # root reads it all the same: the check is asked as a user it refuses
            real = os.access
            monkeypatch.setattr(os, "access", lambda p, mode, **kw: Path(p) != folder and real(p, mode, **kw))
    return folder


@pytest.mark.parametrize("kind", ["missing", "unreadable", "empty", "bert"])
@pytest.mark.parametrize("metric", list(MODEL_OPTIONS))
def test_a_model_folder_that_cannot_be_the_model_is_one_line_and_exit_2(outputs: RunFactory, db: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch, metric: str,
                                                                        kind: str) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep)
    folder = _wrong_folder(kind, tmp_path, monkeypatch)
    option, value = MODEL_OPTIONS[metric]
    result = CliRunner().invoke(cli, ["score", str(sweep), "--db", str(db), "--metrics", metric, option,
                                      value.format(folder)])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert f"{option} {value.format(folder)}" in lines[0] and str(folder) in lines[0]
    assert {"missing": "no folder", "unreadable": "cannot be read", "empty": "holds no",
            "bert": "holds no" if metric == "imagereward" else "holds a 'bert' model"}[kind] in lines[0]
    assert not db.exists() or not sqlite3.connect(db).execute("select count(*) from sqlite_master where name='scores'"
                                                              ).fetchone()[0] or not sqlite3.connect(db).execute(
        "select count(*) from scores").fetchone()[0]
    if kind == "unreadable":
        folder.chmod(0o700)
