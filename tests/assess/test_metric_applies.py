"""Issue 63, item 6: a metric made for one model (the shapes checker) is not computed for another model's cells and
not reported as unavailable there ("shapes unavailable for 56 samples" on a FLUX-type model), while it still scores
the model it was made for."""

from __future__ import annotations

import re
from pathlib import Path

from assess.index.database import Index
from assess.report.write import write_report
from assess.scoring.ingest import score
from render.compose.metric_registry import SHAPES, SHAPES_FIT, SHAPES_PIPELINE, SSIM
from tests.assess.conftest import ANCHOR_CELL, RunFactory, make_cell, shift

SHAPES_PROMPTS = {"s-0": "a red circle in the top left", "s-1": "a blue square in the center"}


def _sweep(outputs: RunFactory) -> Path:
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor", prompts=SHAPES_PROMPTS)
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(4), prompts=SHAPES_PROMPTS)
    return sweep


def test_a_metric_made_for_one_model_applies_to_that_model_only() -> None:
    flux = ANCHOR_CELL  # the fixtures' FluxPipeline model
    shapes = {**flux, "model": {**flux["model"], "pipeline": SHAPES_PIPELINE}}
    assert [SHAPES.applies_to(flux), SHAPES_FIT.applies_to(flux)] == [False, False]
    assert [SHAPES.applies_to(shapes), SHAPES_FIT.applies_to(shapes)] == [True, True]
    assert SSIM.applies_to(flux) and SSIM.applies_to({"model": "a bare name"})  # a metric for every model


def test_the_shapes_checker_is_neither_computed_nor_reported_unavailable_for_a_flux_model(
        outputs: RunFactory, db: Path) -> None:
    sweep = _sweep(outputs)
    summary = score([sweep], db, metrics=["ssim", "shapes", "shapes_fit"])
    assert not [line for line in summary.lines() if "shapes" in line], summary.lines()
    assert not [metric for metric, _ in summary.unavailable if metric.startswith("shapes")]
    with Index.open(db) as index:
        metrics = {r["metric"] for r in index.query("SELECT DISTINCT metric FROM scores")}
    assert metrics == {"ssim"}
    html = write_report([sweep], db).read_text()
    hidden = re.findall(r'<li class="not-shown"[^>]*>(.*?)</li>', html, re.S)
    assert not [item for item in hidden if "shapes" in item]


def test_the_shapes_checker_still_scores_the_shapes_model(shapes_outputs: RunFactory, db: Path) -> None:
    sweep = _sweep(shapes_outputs)
    score([sweep], db, metrics=["shapes", "shapes_fit"])
    with Index.open(db) as index:
        rows = index.query("SELECT metric, value, unavailable_reason FROM scores")
    assert {r["metric"] for r in rows} == {"shapes", "shapes_fit"} and len(rows) == 2 * 2 * 2 * 2


def test_a_scoring_from_before_leaves_no_unavailable_rows_of_a_metric_that_does_not_apply(outputs: RunFactory,
                                                                                          db: Path) -> None:
    """An index scored when the shapes checker still ran on every model: its "unavailable" rows for a FLUX cell go at
    the next scoring, and the cell's summary has no shapes figure left."""
    sweep = _sweep(outputs)
    score([sweep], db, metrics=["ssim"])
    with Index.open(db) as index, index.write() as conn:  # what a scoring before this release left
        cell_key = index.query("SELECT cell_key FROM runs WHERE is_anchor = 0")[0]["cell_key"]
        conn.execute("INSERT INTO scores SELECT cell_key, prompt_sha, prompt_id, seed, 'shapes', 1, NULL, "
                     "'not a shapes caption', 'higher', '', NULL, NULL, scored_at FROM scores WHERE cell_key = ?",
                     (cell_key,))
        index.refresh_cell(conn, cell_key)
        assert index.query("SELECT COUNT(*) AS n FROM cell_scores WHERE metric = 'shapes'")[0]["n"] == 1
    score([sweep], db, metrics=["ssim", "shapes"])
    with Index.open(db) as index:
        assert index.query("SELECT COUNT(*) AS n FROM scores WHERE metric = 'shapes'")[0]["n"] == 0
        assert index.query("SELECT COUNT(*) AS n FROM cell_scores WHERE metric = 'shapes'")[0]["n"] == 0
