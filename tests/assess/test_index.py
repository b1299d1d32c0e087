"""The index schema: versioning, migrations, WAL, the metric catalogue, views, constraints."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from assess.errors import IndexSchemaError, NotScored
from assess.index.database import MIGRATIONS, PIVOT_METRICS, SCHEMA_VERSION, Index, default_index_path
from assess.metrics import SPECS
from assess.scoring.ingest import score


def test_a_new_index_has_the_schema(db: Path) -> None:
    with Index.open(db) as index:
        assert index.schema_version() == SCHEMA_VERSION
        assert [r["name"] for r in index.query("SELECT name FROM migrations ORDER BY name")] == [m[0] for m in MIGRATIONS]
        assert index.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert index.conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 60_000
        tables = set(index.db.table_names())
        assert {"meta", "migrations", "metrics", "runs", "samples", "scores", "cell_scores"} <= tables
        assert {"cells", "leaderboard", "failures"} <= set(index.db.view_names())
        catalogue = {r["name"]: r for r in index.query("SELECT * FROM metrics")}
        assert set(catalogue) == set(SPECS)
        for name, spec in SPECS.items():
            assert (catalogue[name]["version"], catalogue[name]["direction"], catalogue[name]["needs_reference"]) == (
                spec.version, spec.direction, int(spec.needs_reference))


def test_primary_keys_are_the_contract(db: Path) -> None:
    with Index.open(db) as index:
        assert index.db["scores"].pks == ["cell_key", "prompt_sha", "seed", "metric", "metric_version"]
        assert index.db["samples"].pks == ["cell_key", "prompt_sha", "seed"]  # a sample by content, not by id
        assert index.db["runs"].pks == ["path"]
        assert index.db["cell_scores"].pks == ["cell_key", "split", "metric", "metric_version"]
        assert {c.name for c in index.db["cells"].columns} >= set(PIVOT_METRICS) | {"cell_key", "split", "is_anchor"}


def test_a_score_is_a_value_or_a_reason_never_both_or_neither(db: Path) -> None:
    with Index.open(db) as index:
        for value, reason in ((None, None), (1.0, "x")):
            with pytest.raises(sqlite3.IntegrityError):
                index.conn.execute(
                    "INSERT INTO scores (cell_key, prompt_id, seed, metric, metric_version, value, unavailable_reason, "
                    "direction, scored_at) VALUES ('c', 'p', 0, 'psnr', 1, ?, ?, 'higher', 'now')", (value, reason))


def test_an_index_from_a_newer_assess_is_refused(db: Path) -> None:
    Index.open(db).close()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(IndexSchemaError) as err:
        Index.open(db)
    assert str(err.value) == f"{db} has schema version 99, this assess knows up to {SCHEMA_VERSION}: upgrade hypergrid"


def test_a_foreign_database_is_refused(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE other (x)")
    conn.commit()
    conn.close()
    with pytest.raises(IndexSchemaError, match="is not an assess index"):
        Index.open(db)


def test_reopening_does_not_migrate_again(db: Path) -> None:
    Index.open(db).close()
    with Index.open(db) as index:
        assert len(index.query("SELECT * FROM migrations")) == len(MIGRATIONS)


def test_a_missing_index_is_not_created_for_reading(db: Path) -> None:
    with pytest.raises(NotScored) as err:
        Index.open(db, create=False)
    assert str(err.value) == f"no index at {db}: run `assess score <sweep>` first (or pass --db)"
    assert not db.exists()


def test_default_path_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HYPERGRID_INDEX", str(tmp_path / "x.db"))
    assert default_index_path() == tmp_path / "x.db"
    monkeypatch.delenv("HYPERGRID_INDEX")
    assert default_index_path() == Path("outputs/index.db")


def test_views_after_scoring(sweep_with_anchor: Path, db: Path) -> None:
    score([sweep_with_anchor], db, metrics=["psnr"])
    with Index.open(db) as index:
        cells = index.query("SELECT cell_key, status, is_anchor, n_samples, n_expected FROM cells ORDER BY n_samples")
        assert [(c["status"], c["n_samples"], c["n_expected"]) for c in cells][0] == ("failed", 3, 8)
        assert sum(c["is_anchor"] for c in cells) == 1
        [failure] = index.query("SELECT * FROM failures")
        assert failure["category"] == "oom" and failure["failed_record"].endswith("3_steps=4/FAILED.json")
        board = index.leaderboard("smoke")
        assert board[0]["is_anchor"] == 1 and board[0]["speedup"] == pytest.approx(1.0)
        assert [r["speedup"] for r in board[1:]] == sorted((r["speedup"] for r in board[1:]), reverse=True)
