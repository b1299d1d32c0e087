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
