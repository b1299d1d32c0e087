"""Datasette metadata for the index (descriptions and canned queries).

Plain `datasette outputs/index.db` already shows the `leaderboard`, `cells` and `failures`
views; `assess ui` (or `datasette outputs/index.db -m assess/datasette/metadata.json`) adds the
descriptions and parameterised queries of metadata.json.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from assess.errors import AssessError, NotScored

METADATA_DB_NAME = "index"  # metadata.json describes a database file called index.db


def metadata_for(db: Path) -> dict[str, Any]:
    """metadata.json with its database entry renamed to the stem of `db` (datasette's database name)."""
    data = json.loads(resources.files("assess.datasette").joinpath("metadata.json").read_text(encoding="utf-8"))
    data["databases"] = {db.stem: data["databases"][METADATA_DB_NAME]}
    return data


def datasette_command(db: Path, extra: list[str]) -> list[str]:
    """The datasette command line that serves `db` with the metadata (written to a temporary file)."""
    exe = shutil.which("datasette")
    if exe is None:
        raise AssessError("datasette is not installed: pip install 'hypergrid[ui]'")
    if not db.exists():
        raise NotScored(f"no index at {db}: run `assess score <sweep>` first (or pass --db)")
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", prefix="hypergrid-datasette-", delete=False)
    with handle:
        json.dump(metadata_for(db), handle)
    return [exe, str(db), "-m", handle.name, *extra]


def serve(db: Path, extra: list[str]) -> int:
    """Run datasette on `db` until it ends or this process gets SIGTERM / SIGINT (then datasette is stopped and
    waited for); the metadata's temporary folder is removed either way. Binds 127.0.0.1 unless `extra` names a
    host. Returns datasette's exit status (128 + the signal when it was stopped)."""
    import signal
    import subprocess

    command = datasette_command(db, extra)
    metadata = Path(command[3])
    own_host = any(a in ("-h", "--host") or a.startswith("--host=") for a in extra)
    command[4:4] = [] if own_host else ["--host", "127.0.0.1"]
    child = subprocess.Popen(command)
    stopped: list[int] = []

    def stop(signum: int, _frame: Any) -> None:
        stopped.append(signum)
        child.terminate()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        code = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        metadata.unlink(missing_ok=True)
    return 128 + stopped[0] if stopped else code
