"""The CLI edge: exact exit codes and messages; each command calls its library function."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from assess.index.database import Index
from render.compose.metric_registry import quality_metric_names
from tests.assess.conftest import RunFactory, make_cell

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = sorted(cli.commands)


def invoke(*args: str, **env: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env=env or None)


def test_score_a_sweep(sweep_with_anchor: Path, db: Path) -> None:
    result = invoke("score", str(sweep_with_anchor), "--db", str(db), "--metrics", "psnr", "-q")
    assert result.exit_code == 0, result.output
    assert result.output == "scored 4 run(s), 27 sample(s): 19 score(s) written, 0 already current\n"
    with Index.open(db) as index:
        assert index.query("SELECT count(*) AS n FROM scores") == [{"n": 19}]


def test_score_uses_the_index_from_the_environment(sweep_with_anchor: Path, tmp_path: Path) -> None:
    target = tmp_path / "env" / "index.db"
    result = invoke("score", str(sweep_with_anchor), "--metrics", "psnr", "-q", HYPERGRID_INDEX=str(target))
    assert result.exit_code == 0 and target.exists()


def test_score_of_a_folder_without_runs(tmp_path: Path, db: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = invoke("score", str(tmp_path / "empty"), "--db", str(db))
    assert result.exit_code == 1
    assert result.output == (f"Error: {tmp_path / 'empty'} is not a run directory (no run.json) "
                             "and holds no run directory below it\n")
    assert not db.exists()


def test_score_with_an_unknown_metric(sweep_with_anchor: Path, db: Path) -> None:
    result = invoke("score", str(sweep_with_anchor), "--db", str(db), "--metrics", "psnr,fid")
    assert result.exit_code == 1
    assert result.output == ("Error: unknown metric(s): fid. Valid metrics are: psnr, ssim, lpips, clip_score, shapes, "
                             "shapes_fit, pickscore, imagereward, ocr, ocr_prompt, temporal_ssim, cmmd\n")
    assert not db.exists()


def test_score_without_a_path() -> None:
    result = invoke("score")
    assert result.exit_code == 2
    assert "Missing argument 'PATHS...'" in result.output


def test_status_plain_and_json(outputs: RunFactory) -> None:
    sweep = outputs.sweep(cells=[{"overrides": ["steps=8"]}, {"overrides": ["steps=4"]}])
    outputs.run(sweep, "0_steps=8", make_cell(steps=8), overrides=["steps=8"])
    plain = invoke("status", str(sweep))
    assert plain.exit_code == 0
    assert plain.output.splitlines()[-1] == "2 cell(s): 1 done, 1 pending; samples 8/16"
    as_json = invoke("status", str(sweep), "--json")
    assert as_json.exit_code == 0
    rows = json.loads(as_json.output)
    assert [(r["name"], r["state"], r["n_done"]) for r in rows] == [("steps=8", "done", 8), ("steps=4", "pending", 0)]


def test_status_of_nothing(tmp_path: Path) -> None:
    result = invoke("status", str(tmp_path / "nope"))
    assert result.exit_code == 1
    assert result.output == f"Error: {tmp_path / 'nope'}: no such folder\n"


def test_report_prints_its_path(sweep_with_anchor: Path, db: Path, tmp_path: Path) -> None:
    assert invoke("score", str(sweep_with_anchor), "--db", str(db), "--metrics", "psnr", "-q").exit_code == 0
    out = tmp_path / "my report"
    result = invoke("report", str(sweep_with_anchor), "--db", str(db), "--out", str(out))
    assert result.exit_code == 0
    assert result.output == f"{out / 'index.html'}\n"
    assert (out / "index.html").is_file() and (out / "pareto.png").is_file()


def test_report_without_an_index(sweep_with_anchor: Path, db: Path) -> None:
    result = invoke("report", str(sweep_with_anchor), "--db", str(db))
    assert result.exit_code == 1
    assert result.output == f"Error: no index at {db}: run `assess score <sweep>` first (or pass --db)\n"
    assert not db.exists()


def test_report_with_an_unknown_quality_metric(sweep_with_anchor: Path, db: Path) -> None:
    invoke("score", str(sweep_with_anchor), "--db", str(db), "--metrics", "psnr", "-q")
    result = invoke("report", str(sweep_with_anchor), "--db", str(db), "--quality-metric", "fid")
    assert result.exit_code == 1
    assert result.output == f"Error: unknown quality metric 'fid'. Valid: {', '.join(quality_metric_names())}\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str) -> None:
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert cli.commands[command].help, f"{command} has no help text"


def test_help_is_fast_and_imports_nothing_heavy() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = ("import sys; from assess.cli import cli; "
            "heavy = [m for m in ('torch', 'torchmetrics', 'transformers', 'scipy', 'matplotlib', 'numpy') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    help_run = subprocess.run([sys.executable, "-m", "assess", "--help"], env=env, capture_output=True, text=True)
    assert help_run.returncode == 0 and all(c in help_run.stdout for c in COMMANDS)


def _no_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """`assess retime` without its sessions (tests/test_retime.py times real ones): the CLI's ending is under test."""
    from assess import retime

    def no_session(paths: list[Path], db: Path, *args: object, **kwargs: object) -> retime.RetimeResult:
        with Index.open(db):  # the index a real session records into
            return retime.RetimeResult()

    monkeypatch.setattr(retime, "retime_runs", no_session)


@pytest.mark.slow  # a score and a retime of four runs: about twice test_score_a_sweep
def test_retime_ends_as_score_does_with_the_answer_and_the_next_command(
        sweep_with_anchor: Path, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scored = invoke("score", str(sweep_with_anchor), "--db", str(db), "--metrics", "psnr")
    ending = scored.output.splitlines()[-2:]
    assert ending[0].startswith("answer: ") and ending[1].startswith("next: "), scored.output
    _no_session(monkeypatch)
    retimed = invoke("retime", str(sweep_with_anchor), "--db", str(db), "--rounds", "6")
    assert retimed.exit_code == 0, retimed.output
    assert retimed.output.splitlines()[-2:] == ending, f"retime ends with score's answer and next: {retimed.output}"


def test_retime_of_runs_not_scored_yet_ends_with_the_command_that_scores_them(
        sweep_with_anchor: Path, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_session(monkeypatch)
    retimed = invoke("retime", str(sweep_with_anchor), "--db", str(db), "--rounds", "6")
    assert retimed.exit_code == 0, retimed.output
    assert retimed.output.splitlines()[-1] == f"next: assess score {sweep_with_anchor}", retimed.output
