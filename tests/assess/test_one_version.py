"""A comparison never mixes metric versions or reference models: a cell half re-scored after a version change
reads as partially scored, and an anchor and a cell scored with different CLIP models are not compared."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from assess.index.database import Index
from assess.scoring.ingest import score
from assess.statistics.compare import compare_cell
from tests.assess.conftest import ANCHOR_KEY, RunFactory, cell_key_of, make_cell, shift

CELL = cell_key_of(make_cell(steps=8))


def scored(outputs: RunFactory, db: Path) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep)
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(10))
    score([sweep], db, metrics=["ssim"])


def test_scores_of_an_old_version_are_not_averaged_with_the_current(outputs: RunFactory, db: Path) -> None:
    scored(outputs, db)
    with Index.open(db) as index:
        full = compare_cell(index, CELL, ANCHOR_KEY, "smoke").metrics["ssim"]
    with sqlite3.connect(db) as conn:  # half the cell still carries scores of an older ssim
        conn.execute("UPDATE scores SET metric_version = 0, value = 0.1 WHERE cell_key = ? AND metric = 'ssim' AND seed = 1",
                     (CELL,))
    with Index.open(db) as index:
        half = compare_cell(index, CELL, ANCHOR_KEY, "smoke").metrics["ssim"]
    assert half.value > 0.99 and abs(half.value - full.value) < 0.01, "a score of another version entered the cell's mean"


def test_an_anchor_and_a_cell_scored_with_different_models_are_not_compared(outputs: RunFactory, db: Path) -> None:
    scored(outputs, db)
    with sqlite3.connect(db) as conn:  # as if the anchor was scored with one CLIP model and the cell with another
        for key, model in ((ANCHOR_KEY, "model=clip-a"), (CELL, "model=clip-b")):
            conn.execute("INSERT INTO scores (cell_key, prompt_sha, prompt_id, seed, metric, metric_version, value, direction, "
                         "config, scored_at) SELECT cell_key, prompt_sha, prompt_id, seed, 'clip_score', 1, 30.0, 'higher', ?, "
                         "'now' "
                         "FROM samples WHERE cell_key = ?", (model, key))
    with Index.open(db) as index:
        assert "clip_score" not in compare_cell(index, CELL, ANCHOR_KEY, "smoke").metrics
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE scores SET config = 'model=clip-a' WHERE metric = 'clip_score'")
    with Index.open(db) as index:
        assert compare_cell(index, CELL, ANCHOR_KEY, "smoke").metrics["clip_score"].value == 0.0
