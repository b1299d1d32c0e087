"""The metric registry is the one list of metrics: the CLI, the index, the report and the experiment read it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from assess.experiment import ExperimentError, load_experiment
from assess.index.database import Index
from assess.metrics import build_metrics, build_sample_metrics
from render.compose.metric_registry import (
    SPECS, climb_metric_names, leaderboard_specs, quality_metric_names, sample_metric_names, scored_metric_names,
)
from assess.report.write import leaderboard_columns, write_report
from assess.scoring.ingest import score
from tests.assess.climb_fixtures import hydra_state_kept, restore_hydra  # noqa: F401  (the fixture)
from tests.assess.conftest import RunFactory, make_cell, shift

SHAPES_PROMPTS = {"s-000": "a red circle in the centre", "s-001": "a blue square on the left",
                  "s-002": "a green triangle at the top"}


def _help(*args: str) -> str:
    result = CliRunner().invoke(cli, [*args, "--help"], catch_exceptions=False)
    assert result.exit_code == 0
    return " ".join(result.output.split())


def test_every_sample_metric_is_computable_and_named_in_score_help() -> None:
    names = sample_metric_names()
    assert {"psnr", "ssim", "lpips", "clip_score", "shapes", "shapes_fit", "pickscore", "imagereward"} <= set(names)
    assert [m.spec.name for m in build_sample_metrics()] == names
    sample, sets = build_metrics()
    assert [m.spec.name for m in (*sample, *sets)] == scored_metric_names() == [*names, "cmmd"]
    assert all(m.spec.is_set for m in sets) and not any(m.spec.is_set for m in sample)
    assert f"(default: all: {', '.join(scored_metric_names())})" in _help("score")


def test_report_help_lists_the_registry_quality_metrics() -> None:
    names = quality_metric_names()
    assert {"shapes", "shapes_fit", "ssim"} <= set(names)
    assert ", ".join(names) in _help("report")


def test_leaderboard_columns_come_from_the_registry() -> None:
    metrics = [m for m, _ in leaderboard_columns() if m not in ("speedup", "stages")]
    assert metrics == [s.name for s in leaderboard_specs()]
    assert {"shapes", "shapes_fit"} <= set(metrics)


def test_index_has_a_column_for_every_metric(db: Path) -> None:
    with Index.open(db) as index:
        columns = {r["name"] for r in index.query("PRAGMA table_info(cells)")}
        board = {r["name"] for r in index.query("PRAGMA table_info(leaderboard)")}
    assert set(SPECS) <= columns
    assert {"shapes", "shapes_fit", "shapes_delta", "clip_score_delta"} <= board


def test_an_index_made_before_a_metric_existed_gains_its_column(db: Path, shapes_outputs: RunFactory) -> None:
    outputs = shapes_outputs
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor", prompts=SHAPES_PROMPTS)
    score([sweep], db, metrics=["shapes"])
    conn = sqlite3.connect(db)  # the index as the previous release made it: no shapes columns
    conn.executescript("DROP VIEW leaderboard; DROP VIEW cells; ALTER TABLE cell_summary DROP COLUMN shapes; "
                       "ALTER TABLE cell_summary DROP COLUMN shapes_fit;")
    conn.close()
    with Index.open(db) as index:
        rows = index.query("SELECT shapes, shapes_fit FROM cells")
    assert rows and rows[0]["shapes"] is not None and rows[0]["shapes_fit"] is None


def test_shapes_show_in_the_leaderboard_and_serve_as_the_quality_axis(db: Path, shapes_outputs: RunFactory) -> None:
    outputs = shapes_outputs
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor", prompts=SHAPES_PROMPTS)
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(10),
                prompts=SHAPES_PROMPTS)
    score([sweep], db, metrics=["psnr", "shapes", "shapes_fit"])
    html = write_report([sweep], db, quality_metric="shapes").read_text()
    assert "<th>shapes correct (Δ vs anchor)</th>" in html and "<th>shapes fit (Δ vs anchor)</th>" in html
    assert "Speed / quality (shapes)" in html


@pytest.mark.slow
@pytest.mark.usefixtures("restore_hydra")
def test_the_experiment_schema_takes_exactly_the_climbable_metrics() -> None:
    assert set(climb_metric_names()) == {n for n, s in SPECS.items() if s.climbable}
    for name in ("shapes", "shapes_fit", "clip_score", "ssim"):
        with hydra_state_kept():
            assert load_experiment("demo", [f"experiment.quality.metric={name}"]).quality.metric == name
    for name, why in (("psnr", "parity is a band"), ("latency_median_s", "valid metrics are"),
                      ("fid", "valid metrics are")):
        with hydra_state_kept(), pytest.raises(ExperimentError) as err:
            load_experiment("demo", [f"experiment.quality.metric={name}"])
        assert why in str(err.value) and ", ".join(climb_metric_names()) in str(err.value)
