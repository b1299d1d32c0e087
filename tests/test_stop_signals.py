"""Every long command keeps what it finished on SIGTERM as on SIGINT (issue 61, principle 7): `timeout`, SLURM or a
supervisor stops a process with SIGTERM, and what a Ctrl-C keeps must survive it too.

Each test runs the real `assess` command in a subprocess whose one function is wrapped to send the process a real
SIGTERM at a chosen point (so the stop lands where it matters, every time), then checks what is left. Slow: each
subprocess imports torch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from assess.scoring.ingest import score
from render.rundir.session_log import read_sessions
from tests.test_retime import _render

pytestmark = pytest.mark.slow

STOPPED = textwrap.dedent("""
    import os, signal, sys
    import {module} as target
    real, calls = target.{name}, []

    def stopping(*args, **kwargs):
        calls.append(1)
        if len(calls) == {after}:
            os.kill(os.getpid(), signal.{signal})
        return real(*args, **kwargs)

    target.{name} = stopping
    sys.argv = ["assess", *sys.argv[1:]]
    from assess.cli import main
    main()
""")


def stopped(target: str, after: int, *args: str, cwd: Path, sig: str = "SIGTERM") -> subprocess.CompletedProcess:
    """`assess ARGS` in a subprocess that sends itself `sig` on the `after`-th call of `target` (module.function)."""
    module, name = target.rsplit(".", 1)
    code = STOPPED.format(module=module, name=name, after=after, signal=sig)
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


@pytest.fixture
def sweep(tiny_cache: Path, tmp_path: Path) -> Path:
    out = tmp_path / "outputs"
    _render(out, "steps=2")
    return out / "sweep"


def test_retime_stopped_by_sigterm_keeps_its_finished_rounds_as_ctrl_c_does(sweep: Path, tmp_path: Path) -> None:
    sig = "SIGTERM"  # what Ctrl-C keeps: tests/test_retime.py's session stopped mid-way; both raise here now
    # two contenders (the cell, its anchor): one warm-up each, then 4 whole rounds, then the stop in the fifth
    done = stopped("render.timing.sessions.timed_call", 2 + 2 * 4 + 1, "retime", str(sweep), "--rounds", "20",
                   "--db", str(tmp_path / "index.db"), cwd=tmp_path, sig=sig)
    assert done.returncode == 128 + getattr(signal, sig), (done.returncode, done.stderr[-2000:])
    assert f"received {sig}" in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    (run,) = sweep.iterdir()
    (session,), problems = read_sessions(run)
    assert not problems and not session.complete and session.rounds == 4
    # ... and indexed, as a finished session is: the next `assess status` shows the rounds without a rebuild
    from assess.index.database import Index

    with Index.open(tmp_path / "index.db") as index:
        assert index.query("SELECT rounds, complete FROM timing_sessions") == [{"rounds": 4, "complete": 0}]


def test_a_rebuild_stopped_by_sigterm_leaves_the_old_index_and_no_staging_file(sweep: Path, tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    assert not score([sweep.parent], db, metrics=["psnr"]).failed
    before = db.read_bytes()
    done = stopped("assess.scoring.ingest.score_run", 1, "score", "--rebuild", str(sweep.parent), "--db", str(db),
                   "--metrics", "psnr", cwd=tmp_path)
    assert done.returncode == 128 + signal.SIGTERM, (done.returncode, done.stderr[-2000:])
    assert "received SIGTERM" in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".index.db")) == []  # no staging left
    assert db.read_bytes() == before


def test_a_report_stopped_by_sigterm_leaves_no_half_written_folder(sweep: Path, tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    assert not score([sweep.parent], db, metrics=["psnr"]).failed
    out = tmp_path / "report"
    done = stopped("assess.report.write._render_html", 1, "report", str(sweep), "--db", str(db), "--out", str(out),
                   cwd=tmp_path)
    assert done.returncode == 128 + signal.SIGTERM, (done.returncode, done.stderr[-2000:])
    assert "received SIGTERM" in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".report")] == []
