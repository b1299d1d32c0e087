"""Datasette metadata for the index (descriptions and canned queries).

Plain `datasette outputs/index.db` already shows the `leaderboard`, `cells` and `failures`
views; `assess ui` (or `datasette outputs/index.db -m assess/datasette/metadata.json`) adds the
descriptions and parameterised queries of metadata.json.
"""

from __future__ import annotations

import json
import importlib.util
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

from assess.errors import AssessError, NotScored
from render.run.signals import Forwarded, note_signals

POLL_S = 0.1  # how often the wait for datasette looks for a noted stop signal
METADATA_DB_NAME = "index"  # metadata.json describes a database file called index.db


def metadata_for(db: Path) -> dict[str, Any]:
    """metadata.json with its database entry renamed to the stem of `db` (datasette's database name)."""
    data = json.loads(resources.files("assess.datasette").joinpath("metadata.json").read_text(encoding="utf-8"))
    data["databases"] = {db.stem: data["databases"][METADATA_DB_NAME]}
    return data


def datasette_command(db: Path, extra: list[str]) -> tuple[list[str], Path]:
    """The datasette command line that serves `db` with the metadata, and the metadata's temporary file (the caller
    removes it). Binds 127.0.0.1 unless `extra` names a host."""
    if importlib.util.find_spec("datasette") is None:
        raise AssessError("datasette is not installed: pip install 'hypergrid[ui]'")
    if not db.exists():
        raise NotScored(f"no index at {db}: run `assess score <sweep>` first (or pass --db)")
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", prefix="hypergrid-datasette-", delete=False)
    with handle:
        json.dump(metadata_for(db), handle)
    own_host = any(a in ("-h", "--host") or a.startswith("--host=") for a in extra)
    host = [] if own_host else ["--host", "127.0.0.1"]
    # this interpreter's datasette, not the first on PATH: a venv's python run without activating it finds its own
    return [sys.executable, "-m", "datasette", str(db), "-m", handle.name, *host, *extra], Path(handle.name)


GRACE_S = 1.5  # how long datasette may take to stop after a signal before it is killed


def serve(db: Path, extra: list[str]) -> int:
    """Run datasette on `db` until it ends or this process gets SIGTERM / SIGINT (then datasette is stopped, killed
    after GRACE_S, and waited for); the metadata's temporary file is removed either way. Any number of signals, from
    before datasette starts to after it ended, are only noted (render.run.signals.note_signals). Returns datasette's
    exit status (128 + the signal when it was stopped)."""
    command, metadata = datasette_command(db, extra)
    try:
        with note_signals() as noted:
            child = subprocess.Popen(command)
            try:
                code = _wait(child, noted)
            finally:
                _end(child)
    finally:
        metadata.unlink(missing_ok=True)
    return 128 + noted.signum if noted.signum is not None else code


def _wait(child: subprocess.Popen[bytes], noted: Forwarded) -> int:
    """datasette's exit status: it ends by itself, or is sent SIGTERM once a signal is noted and killed GRACE_S later."""
    asked_at: float | None = None
    while True:
        try:
            return int(child.wait(timeout=POLL_S))
        except subprocess.TimeoutExpired:
            pass
        if noted.signum is not None and asked_at is None:
            asked_at = time.monotonic()
            child.terminate()
        elif asked_at is not None and time.monotonic() - asked_at > GRACE_S:
            child.kill()


def _end(child: subprocess.Popen[bytes]) -> None:
    """datasette stopped and reaped, whatever interrupted the wait."""
    if child.poll() is None:
        child.kill()
    child.wait()
