"""The index's writes through sqlite-utils keep the hand-written SQL's rules (benchmarks/index_baseline.py, the
yardstick of benchmarks/index.py): the same writes give the same tables, conditional upserts included."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from assess.index.database import Index, ScoreRow
from assess.metrics import SPECS, Outcome
from tests.conftest import load_benchmark

PSNR, SSIM = SPECS["psnr"], SPECS["ssim"]
IGNORED = {"scored_at", "updated_at", "indexed_at", "computed_at"}  # clocks


def run(cell: str, path: str) -> dict[str, Any]:
    bench = load_benchmark("index")
    return {**bench.run_row(cell), "path": path}


def sample(cell: str, path: str, i: int, reused_from: str | None = None, problem: str | None = None,
           latency: float = 1.0) -> dict[str, Any]:
    return {"cell_key": cell, "prompt_sha": f"sha{i}", "prompt_id": f"p{i}", "seed": 0, "split": "dev",
            "run_path": path, "image": f"images/p{i}.png", "prompt": "a prompt", "latency_s": latency, "warmup": 0,
            "reused_from": reused_from, "problem": problem}


def score(cell: str, i: int, outcome: Outcome, spec: Any = PSNR, config: str = "") -> ScoreRow:
    return ScoreRow(cell, f"sha{i}", f"p{i}", 0, spec, outcome, config, "anchor")


def newer(spec: Any) -> Any:
    from dataclasses import replace
    return replace(spec, version=spec.version + 1)


def writes(index: Index) -> None:
    """Every rule of the conditional upserts, one after another, each in its own transaction."""
    a, b = "/o/a", "/o/b"
    steps: list[Any] = [
        lambda c: (index.upsert_run(c, run("cell", a)), index.upsert_run(c, run("cell", b))),
        lambda c: index.upsert_samples(c, [sample("cell", a, 0), sample("cell", a, 1, problem="image missing")]),
        # another run's reuse never replaces the rendering run's sample; the run's own rewrite keeps its problem
        lambda c: index.upsert_samples(c, [sample("cell", b, 0, reused_from="other", latency=9.0),
                                           sample("cell", a, 1, latency=2.0), sample("cell", b, 2, reused_from="x")]),
        lambda c: index.upsert_samples(c, [sample("cell", b, 2, latency=3.0)]),  # a rendering replaces a reuse
        lambda c: index.write_scores(c, [score("cell", 0, Outcome.of(1.0)), score("cell", 1, Outcome.of(2.0)),
                                         score("cell", 2, Outcome.of(3.0)), score("cell", 0, Outcome.of(0.5), SSIM)]),
        # unavailable never undoes a value of the same version and config; another config does; force does
        lambda c: index.write_scores(c, [score("cell", 0, Outcome.unavailable("late")),
                                         score("cell", 1, Outcome.unavailable("late"), config="model=x")]),
        lambda c: index.write_scores(c, [score("cell", 2, Outcome.unavailable("forced"))], force=True),
        # another version of a metric replaces every other version of it
        lambda c: index.write_scores(c, [score("cell", 0, Outcome.of(7.0), newer(SSIM))]),
        lambda c: index.write_set_score(c, {"cell_key": "cell", "split": "dev", "metric": "cmmd", "metric_version": 1,
                                            "value": 0.1, "unavailable_reason": None, "direction": "lower", "n": 3,
                                            "config": "", "reference_cell_key": "anchor", "pairs": "d", "detail": None}),
        lambda c: index.flag_samples(c, {("cell", "sha0", 0): "unreadable", ("cell", "gone", 0): "missing"}),
        lambda c: index.write_parity(c, [{"cell_key": "cell", "prompt_sha": "sha0", "seed": 0, "twin_cell_key": "t",
                                          "max_levels": 3, "ssim": 0.99, "unavailable_reason": None}]),
        lambda c: index.refresh_cell(c, "cell"),
    ]
    for step in steps:
        with index.write() as conn:
            step(conn)


def tables(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    found = {}
    for table in ("runs", "samples", "scores", "set_scores", "cell_scores", "cell_summary", "parity"):
        rows = conn.execute(f"SELECT * FROM {table}").fetchall()
        found[table] = sorted(tuple(v for k, v in zip(r.keys(), r, strict=True) if k not in IGNORED) for r in rows)
    conn.close()
    return found


def test_the_writes_give_the_tables_the_hand_written_sql_gave(tmp_path: Path) -> None:
    baseline = load_benchmark("index_baseline").BaselineIndex
    for name, writer in (("baseline", baseline), ("now", Index)):
        with writer.open(tmp_path / f"{name}.db") as index:
            writes(index)
    now, then = tables(tmp_path / "now.db"), tables(tmp_path / "baseline.db")
    assert now == then
    with Index.open(tmp_path / "now.db") as index:  # the rules held (the comparison is not of two empty tables)
        samples = {r["prompt_sha"]: r for r in index.query("SELECT * FROM samples")}
        scores = {(r["prompt_sha"], r["metric"]): r["value"] for r in index.query("SELECT * FROM scores")}
        versions = {r["metric_version"] for r in index.query("SELECT * FROM scores WHERE metric = 'ssim'")}
    assert (samples["sha0"]["run_path"], samples["sha0"]["problem"]) == ("/o/a", "unreadable")
    assert (samples["sha1"]["latency_s"], samples["sha1"]["problem"]) == (2.0, "image missing")
    assert (samples["sha2"]["run_path"], samples["sha2"]["reused_from"]) == ("/o/b", None)
    assert scores == {("sha0", "psnr"): 1.0, ("sha1", "psnr"): None, ("sha2", "psnr"): None, ("sha0", "ssim"): 7.0}
    assert versions == {SSIM.version + 1}

def test_a_schema_changed_by_another_process_is_read_afresh(tmp_path: Path) -> None:
    with Index.open(tmp_path / "index.db") as index:
        with index.write() as conn:
            index.upsert_run(conn, run("cell", "/o/a"))
        cached = index.table("runs")
        other = sqlite3.connect(tmp_path / "index.db")
        other.execute("ALTER TABLE runs ADD COLUMN newer TEXT")  # a later assess migrated it meanwhile
        other.close()
        with index.write() as conn:
            assert index.table("runs") is not cached
            index.upsert_run(conn, {**run("cell", "/o/a"), "newer": "x"})
        assert index.query("SELECT newer FROM runs") == [{"newer": "x"}]
