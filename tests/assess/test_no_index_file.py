"""Nothing indexed, no index file (issue 61, principle 7): a scoring that could index no run leaves no index behind
(an empty one would make the next `assess status` say "not scored" instead of "no index"), and a rebuild that could
index nothing keeps the index it would have replaced."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from click.testing import CliRunner

from assess.cli import cli
from assess.index.database import Index
from assess.scoring.ingest import score


def _tables(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))


def _broken_sweep(root: Path) -> Path:
    for name in ("a", "b"):
        run = root / "sweep" / name
        run.mkdir(parents=True)
        (run / "run.json").write_text("{ not json")
    return root / "sweep"


def test_a_scoring_that_indexes_nothing_leaves_no_index_file(tmp_path: Path) -> None:
    sweep, db = _broken_sweep(tmp_path / "outputs"), tmp_path / "index.db"
    summary = score([sweep], db)
    assert len(summary.failed) == 2 and summary.runs == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outputs"]


def test_the_cli_names_the_runs_and_leaves_no_index_file(tmp_path: Path) -> None:
    sweep, db = _broken_sweep(tmp_path / "outputs"), tmp_path / "index.db"
    result = CliRunner().invoke(cli, ["score", str(sweep), "--db", str(db), "-q"])
    assert result.exit_code == 1 and "2 run(s) could not be indexed" in result.output, result.output
    assert not db.exists() and not Path(f"{db}-wal").exists()


def test_a_rebuild_that_indexes_nothing_keeps_the_old_index(tmp_path: Path) -> None:
    sweep, db = _broken_sweep(tmp_path / "outputs"), tmp_path / "index.db"
    with Index.open(db) as index, index.write() as conn:  # the index the user had
        conn.execute("CREATE TABLE kept (x)")
    before = _tables(db)
    result = CliRunner().invoke(cli, ["score", "--rebuild", str(sweep), "--db", str(db)])
    assert result.exit_code == 1 and "left as it was" in result.output, result.output
    assert _tables(db) == before and "kept" in before
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".index.db")]  # no staging left
