"""Amendments one can live with (issue 30 item 5, given to 28): after `assess climb <exp> --amend ... --set ...` no
later command needs the --set again (the rule in force, its grid and seeds included, is the ledger's); the report
shows the amendment history, not a mismatch banner; a user's ./conf/experiment/<name>.yaml of a shipped name is
refused, naming both files."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from assess.experiment import load_experiment
from assess.scoring.ingest import score
from render.laws import Ledger, experiment_rule, freeze_rule
from tests.assess.climb_fixtures import (DemoRuns, demo_cell, dev_ids,
                                         restore_hydra)  # noqa: F401  (the fixture)
from tests.assess.conftest import shift
from tests.conftest import compose_cfg

pytestmark = pytest.mark.usefixtures("restore_hydra")
AMENDED = ("--set", "experiment.axes.steps=[2,4,6,8,12,16]", "--set", "experiment.seeds=[0,1]",
           "--set", "experiment.quality.band=0.004")


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def amended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tiny-demo frozen as shipped, then amended (a finer steps grid, a second seed, a wider band)."""
    monkeypatch.chdir(tmp_path)
    freeze_rule(Ledger("tiny-demo", tmp_path / "outputs"), experiment_rule(compose_cfg("experiment=tiny-demo").experiment))
    result = invoke("climb", "tiny-demo", *AMENDED, "--amend", "a finer grid and a second seed")
    assert result.exit_code == 0 and "rule amended" in result.output, result.output
    return tmp_path


@pytest.mark.slow
def test_after_an_amendment_the_grid_seeds_and_band_hold_without_the_set(amended: Path) -> None:
    exp = load_experiment("tiny-demo")  # composed as shipped: no --set
    assert exp.axes["steps"] == ("2", "4", "6", "8", "12", "16")
    assert exp.seeds == (0, 1) and exp.quality.band == 0.004
    result = invoke("climb", "tiny-demo")
    assert result.exit_code == 0, result.output
    commands = [line.strip() for line in result.output.splitlines() if line.startswith("  python -m render")]
    assert any("steps=6" in c or "steps=4,6" in c or ",6," in c for c in commands), commands  # the amended grid
    assert all("seed=[0,1]" in c for c in commands), commands  # the amended seeds, passed on to the renderer


@pytest.mark.slow
def test_the_report_after_an_amendment_shows_its_history_not_a_mismatch(amended: Path) -> None:
    runs = DemoRuns((amended / "outputs").resolve())
    sweep = runs.sweep()
    runs.run(sweep, demo_cell(4), dev_ids(4), perturb=shift(1), latency=0.15)
    runs.anchor(dev_ids(4))
    score([sweep], amended / "index.db", metrics=["ssim"])
    result = invoke("report", "tiny-demo", "--db", str(amended / "index.db"), "--out", str(amended / "r"))
    assert result.exit_code == 0, result.output
    html = (amended / "r" / "index.html").read_text()
    assert 'id="rule-changed"' not in html
    assert "a finer grid and a second seed" in html and "quality.band: 0.002 -&gt; 0.004" in html


def test_a_user_experiment_of_a_shipped_name_is_refused_naming_both_files(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "conf" / "experiment" / "tiny-demo.yaml"
    mine.parent.mkdir(parents=True)
    mine.write_text("# @package _global_\nexperiment:\n  name: tiny-demo\n")
    result = invoke("climb", "tiny-demo")
    assert result.exit_code == 1
    assert str(mine) in result.output and "render/conf/experiment/tiny-demo.yaml" in result.output
    assert "would never be used" in result.output


def test_a_render_of_a_shadowed_experiment_is_refused_naming_both_files(tmp_path: Path, tiny_cache: Path) -> None:
    from tests.conftest import run_render

    mine = tmp_path / "conf" / "experiment" / "tiny-demo.yaml"
    mine.parent.mkdir(parents=True)
    mine.write_text("# @package _global_\nexperiment:\n  name: tiny-demo\n")
    result = run_render("experiment=tiny-demo", "model=tiny", "prompts.limit=1", "seed=0", "steps=2", cwd=tmp_path,
                        timeout=300)
    assert result.returncode == 2, result.stderr
    assert str(mine.resolve()) in result.stderr and "render/conf/experiment/tiny-demo.yaml" in result.stderr
    assert not (tmp_path / "outputs" / "runs").exists() and not list((tmp_path / "outputs").rglob("run.json"))
