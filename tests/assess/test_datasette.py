"""Datasette (the `ui` extra): plain views, and the canned queries of assess/datasette/metadata.json."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from assess.datasette import metadata_for
from assess.index.database import Index
from assess.scoring.ingest import score

pytestmark = pytest.mark.skipif(importlib.util.find_spec("datasette") is None,
                                reason="needs datasette (pip install 'hypergrid[ui]')")
METADATA = Path(__file__).resolve().parents[2] / "assess" / "datasette" / "metadata.json"


@pytest.fixture
def index_db(sweep_with_anchor: Path, tmp_path: Path) -> Path:
    db = tmp_path / "index.db"
    score([sweep_with_anchor], db, metrics=["psnr"])
    return db


def get(db: Path, url: str, *extra: str) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "datasette", str(db), *extra, "--get", url], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_plain_datasette_shows_the_leaderboard_view(index_db: Path) -> None:
    rows = get(index_db, "/index/leaderboard.json?_shape=array")
    assert len(rows) == 4 and sum(r["is_anchor"] for r in rows) == 1


def test_canned_queries_run_against_the_schema(index_db: Path) -> None:
    queries = json.loads(METADATA.read_text())["databases"]["index"]["queries"]
    params = {"split": "smoke", "min_ssim": "0.9", "cell_key": "x"}
    with Index.open(index_db) as index:
        for query in queries.values():  # every canned query is valid SQL on this schema
            index.conn.execute(query["sql"], {p: v for p, v in params.items() if f":{p}" in query["sql"]}).fetchall()
    rows = get(index_db, "/index/leaderboard_by_split.json?split=smoke&_shape=array", "-m", str(METADATA))
    assert rows[0]["is_anchor"] == 1 and len(rows) == 4


@pytest.mark.slow
def test_assess_ui_renames_the_database_for_any_file_name(index_db: Path, tmp_path: Path) -> None:
    other = tmp_path / "my-index.db"
    shutil.copy(index_db, other)
    assert list(metadata_for(other)["databases"]) == ["my-index"]
    result = subprocess.run([sys.executable, "-m", "assess", "ui", "--db", str(other), "--get",
                             "/my-index/spent.json?_shape=array"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(METADATA.parents[2])})
    assert result.returncode == 0, result.stderr
    [spent] = json.loads(result.stdout)
    assert (spent["split"], spent["runs"], spent["rendered"], spent["reused"]) == ("smoke", 4, 27, 0)
    assert spent["gpu_s"] > 0


def test_assess_ui_without_an_index(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["ui", "--db", str(tmp_path / "none.db")], catch_exceptions=False)
    assert result.exit_code == 1
    assert result.output == f"Error: no index at {tmp_path / 'none.db'}: run `assess score <sweep>` first (or pass --db)\n"
