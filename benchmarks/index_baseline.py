"""The BASELINE for benchmarks/index.py: the index's writes as hand-written SQL, copied from assess/index/database.py of main at
b6785e9, before its writes moved to sqlite-utils (issue 31 item 5). Only the benchmark uses it: it times
this writer and `assess.index.database.Index` side by side, on the same data, in one run. Keep it as it is: it is the yardstick."""

from __future__ import annotations

import sqlite3
from typing import Any

from assess.index.database import Index, ScoreRow, now_iso


class BaselineIndex(Index):
    """Index with the hand-written statements of its scoring writes (runs, samples, scores, set_scores, parity,
    flags, cell_scores, cell_summary); tests/assess/test_index_writes.py checks both give the same tables."""

    def upsert_run(self, conn: sqlite3.Connection, row: dict[str, Any]) -> None:
        columns = list(row)
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != "path")
        conn.execute(
            f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
            f"ON CONFLICT (path) DO UPDATE SET {updates}",
            [row[c] for c in columns],
        )

    def upsert_samples(self, conn: sqlite3.Connection, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        columns = list(rows[0])
        keep = ("cell_key", "prompt_sha", "seed", "problem")
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in keep)
        conn.executemany(
            f"INSERT INTO samples ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
            f"ON CONFLICT (cell_key, prompt_sha, seed) DO UPDATE SET {updates}, "
            "problem = CASE WHEN samples.run_path = excluded.run_path AND excluded.problem IS NULL "
            "THEN samples.problem ELSE excluded.problem END "
            "WHERE excluded.reused_from IS NULL OR samples.reused_from IS NOT NULL "
            "OR samples.run_path = excluded.run_path",
            [[r[c] for c in columns] for r in rows],
        )

    def write_scores(self, conn: sqlite3.Connection, rows: list[ScoreRow], force: bool = False) -> None:
        stamp = now_iso()
        conn.executemany(
            "DELETE FROM scores WHERE cell_key = ? AND prompt_sha = ? AND seed = ? AND metric = ? "
            "AND metric_version <> ?",
            [(r.cell_key, r.prompt_sha, r.seed, r.spec.name, r.spec.version) for r in rows],
        )
        conn.executemany(
            "INSERT INTO scores (cell_key, prompt_sha, prompt_id, seed, metric, metric_version, value, "
            "unavailable_reason, direction, config, reference_cell_key, detail, scored_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (cell_key, prompt_sha, seed, metric, metric_version) DO UPDATE SET prompt_id = excluded.prompt_id, "
            "value = excluded.value, unavailable_reason = excluded.unavailable_reason, "
            "direction = excluded.direction, config = excluded.config, "
            "reference_cell_key = excluded.reference_cell_key, detail = excluded.detail, "
            "scored_at = excluded.scored_at "
            "WHERE ? OR excluded.value IS NOT NULL OR scores.value IS NULL OR scores.config <> excluded.config",
            [
                (r.cell_key, r.prompt_sha, r.prompt_id, r.seed, r.spec.name, r.spec.version, r.outcome.value,
                 r.outcome.unavailable_reason, r.spec.direction, r.config, r.reference_cell_key,
                 r.outcome.detail, stamp, int(force))
                for r in rows
            ],
        )

    def write_set_score(self, conn: sqlite3.Connection, row: dict[str, Any]) -> None:
        conn.execute("DELETE FROM set_scores WHERE cell_key = ? AND split = ? AND metric = ? AND metric_version <> ?",
                     (row["cell_key"], row["split"], row["metric"], row["metric_version"]))
        columns = [*row, "scored_at"]
        conn.execute(f"INSERT OR REPLACE INTO set_scores ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                     [*row.values(), now_iso()])

    def write_parity(self, conn: sqlite3.Connection, rows: list[dict[str, Any]]) -> None:
        stamp = now_iso()
        conn.executemany(
            "INSERT OR REPLACE INTO parity (cell_key, prompt_sha, seed, twin_cell_key, max_levels, ssim, "
            "unavailable_reason, computed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(r["cell_key"], r["prompt_sha"], r["seed"], r["twin_cell_key"], r["max_levels"], r["ssim"],
              r["unavailable_reason"], stamp) for r in rows])

    def flag_samples(self, conn: sqlite3.Connection, flags: dict[tuple[str, str, int], str | None]) -> None:
        conn.executemany(
            "UPDATE samples SET problem = ? WHERE cell_key = ? AND prompt_sha = ? AND seed = ?",
            [(problem, *key) for key, problem in flags.items()],
        )

    def _write_cell(self, conn: sqlite3.Connection, cell_key: str, rows: list[tuple[Any, ...]],
                    summaries: list[dict[str, Any]]) -> None:
        stamp = now_iso()
        conn.execute("DELETE FROM cell_scores WHERE cell_key = ?", (cell_key,))
        conn.executemany(
            "INSERT INTO cell_scores (cell_key, split, metric, metric_version, direction, value, "
            "unavailable_reason, n, n_unavailable, detail, low, high, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*row, stamp) for row in rows],
        )
        conn.execute("DELETE FROM cell_summary WHERE cell_key = ?", (cell_key,))
        for summary in summaries:
            columns = [*summary, "updated_at"]
            conn.execute(f"INSERT INTO cell_summary ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                         [*summary.values(), stamp])
