"""One bad run never blocks the others: score and status go on past a run they cannot read or index, name it
and its problem, and exit 1 at the end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from assess.index.database import Index
from assess.scoring.ingest import score
from tests.assess.conftest import RunFactory, make_cell


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def indexed_paths(db: Path) -> set[str]:
    with Index.open(db) as index:
        return {Path(r["path"]).name for r in index.query("SELECT path FROM runs")}


def sweep_with_a_seed_sqlite_cannot_store(outputs: RunFactory) -> Path:
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_steps=28")
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"])
    outputs.run(sweep, "2_seed=2**63", make_cell(steps=4), overrides=["steps=4", f"seed={2**63}"], seeds=(2**63,))
    return sweep


def test_a_seed_sqlite_cannot_store_is_named_and_the_other_runs_are_indexed(outputs: RunFactory, db: Path) -> None:
    sweep = sweep_with_a_seed_sqlite_cannot_store(outputs)
    summary = score([sweep], db, metrics=["psnr"])
    assert indexed_paths(db) == {"0_steps=28", "1_steps=8"}
    (failed,) = summary.failed
    assert failed.startswith(str(sweep / "2_seed=2**63")) and "OverflowError" in failed
    with Index.open(db) as index:
        assert index.query("SELECT count(*) AS n FROM scores WHERE metric = 'psnr'") == [{"n": 8}]


def test_score_cli_names_the_run_it_could_not_index_and_exits_1(outputs: RunFactory, db: Path) -> None:
    sweep = sweep_with_a_seed_sqlite_cannot_store(outputs)
    result = invoke("score", str(sweep), "--db", str(db), "--metrics", "psnr")
    assert result.exit_code == 1
    assert "scored 2 run(s), 16 sample(s)" in result.output and "1 run(s) could not be indexed" in result.output
    assert f"NOT INDEXED {sweep / '2_seed=2**63'}: OverflowError" in result.output


def broken_run_json(outputs: RunFactory) -> tuple[Path, Path]:
    sweep = outputs.sweep(cells=[{"overrides": ["steps=28"]}, {"overrides": ["steps=8"]}])
    outputs.anchor(sweep, "0_steps=28")
    bad = outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"])
    (bad / "run.json").write_bytes(b'{"schema": 2, "cell_key": "\xff')  # torn by a full disk
    return sweep, bad


def two_terminal_records(outputs: RunFactory) -> tuple[Path, Path]:
    sweep = outputs.sweep(cells=[{"overrides": ["steps=28"]}, {"overrides": ["steps=8"]}])
    outputs.anchor(sweep, "0_steps=28")
    bad = outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"])
    (bad / "FAILED.json").write_text('{"category": "error"}')  # a requeued job's second ending, by hand
    return sweep, bad


def test_a_run_json_that_cannot_be_read_is_named_and_the_others_are_scored(outputs: RunFactory, db: Path) -> None:
    sweep, bad = broken_run_json(outputs)
    result = invoke("score", str(sweep), "--db", str(db), "--metrics", "psnr")
    assert result.exit_code == 1
    assert f"NOT INDEXED {bad}: InvalidRunDirectory: {bad / 'run.json'}: not a readable JSON file" in result.output
    assert indexed_paths(db) == {"0_steps=28"}


@pytest.mark.parametrize("spoil,problem", [(broken_run_json, "not a readable JSON file"),
                                           (two_terminal_records, "both DONE.json and FAILED.json")])
def test_status_shows_an_unreadable_run_with_its_problem_and_the_others(spoil, problem: str, outputs: RunFactory) -> None:
    sweep, bad = spoil(outputs)
    result = invoke("status", str(sweep), "--json")
    assert result.exit_code == 1
    rows = {row["name"]: row for row in json.loads(result.output)}
    assert set(rows) == {"anchor", "1_steps=8"}  # the unreadable cell is not also listed as pending (by its folder)
    assert rows["anchor"]["state"] == "done"
    assert rows["1_steps=8"]["state"] == "unreadable" and problem in rows["1_steps=8"]["detail"]
    plain = invoke("status", str(sweep))
    assert plain.exit_code == 1 and "1 unreadable" in plain.output.splitlines()[-1]


def test_report_names_a_run_it_cannot_read_and_writes_the_rest(sweep_with_anchor: Path, db: Path, tmp_path: Path) -> None:
    assert invoke("score", str(sweep_with_anchor), "--db", str(db), "--metrics", "psnr", "-q").exit_code == 0
    bad = sweep_with_anchor / "2_steps=8"
    (bad / "FAILED.json").write_text('{"category": "error"}')  # next to its DONE.json: no longer a valid run
    out = tmp_path / "report"
    result = CliRunner().invoke(cli, ["report", str(sweep_with_anchor), "--db", str(db), "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert (out / "index.html").is_file()
    assert f"unreadable {bad}: InvalidRunDirectory: {bad}: both DONE.json and FAILED.json" in result.output
    html = (out / "index.html").read_text()
    assert "both DONE.json and FAILED.json" in html and "3_steps=4" in html


def test_status_of_an_output_root_goes_on_past_a_sweep_record_it_cannot_read(outputs: RunFactory) -> None:
    good = outputs.sweep("2026-11-30/10-04-12-aaaa", cells=[{"overrides": ["steps=28"]}])
    outputs.anchor(good, "0_steps=28")
    bad = outputs.sweep("2026-11-30/11-00-00-bbbb", cells=[{"overrides": ["steps=8"]}])
    outputs.run(bad, "0_steps=8", make_cell(steps=8), overrides=["steps=8"])
    (bad / "SWEEP.json").write_text('{"cells": [')
    for target in (outputs.root, bad):
        result = invoke("status", str(target), "--json")
        assert result.exit_code == 1, result.output
        rows = {(Path(row["sweep"]).name, row["name"]): row for row in json.loads(result.output)}
        assert rows[("11-00-00-bbbb", "SWEEP.json")]["state"] == "unreadable"
        assert "not a readable JSON file" in rows[("11-00-00-bbbb", "SWEEP.json")]["detail"]
        assert rows[("11-00-00-bbbb", "steps=8")]["state"] == "done"
    assert {name for _, name in rows} == {"SWEEP.json", "steps=8"}


def test_an_index_that_cannot_be_created_or_a_report_folder_under_a_file_is_one_line(sweep_with_anchor: Path,
                                                                                    tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = CliRunner().invoke(cli, ["score", str(sweep_with_anchor), "--db", str(blocker / "index.db")])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.exception
    assert result.output.startswith(f"Error: {blocker / 'index.db'}: the index cannot be created there (")
    db = tmp_path / "index.db"
    assert invoke("score", str(sweep_with_anchor), "--db", str(db), "--metrics", "psnr", "-q").exit_code == 0
    result = CliRunner().invoke(cli, ["report", str(sweep_with_anchor), "--db", str(db), "--out", str(blocker / "r")])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.exception
    assert result.output.startswith("Error: ") and "Not a directory" in result.output and len(result.output.splitlines()) == 1
