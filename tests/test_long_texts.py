"""Long texts are shortened in summaries (issue 61, principle 7): a 20,000-character prompt was printed whole in
`assess score`'s summary (43 kB). Every summary line that quotes recorded text (a prompt, a failure's message, a
damaged record) says its start and how much was cut; the records keep the whole text."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from assess.metrics import SampleInput
from assess.metrics.shapes import ShapesMetric
from assess.scoring.tally import ScoreSummary

LONG = "a photograph of " + "very " * 4000 + "long prompt"  # 20,027 characters


def test_a_long_prompt_is_shortened_in_the_score_summary() -> None:
    (outcome,) = ShapesMetric().score([SampleInput("p0", 0, np.zeros((8, 8, 3), np.uint8), LONG)])
    summary = ScoreSummary(unavailable=Counter({("shapes", outcome.unavailable_reason): 1}))
    text = "\n".join(summary.lines())
    assert len(text) < 1_200 and "a photograph of very" in text and "characters" in text, len(text)


def test_long_flagged_and_damaged_lines_are_shortened_in_the_score_summary() -> None:
    summary = ScoreSummary(flagged=[f"/runs/a/images/p0.png: image does not match its record: {LONG}"],
                           problems=[f"samples.jsonl line 3 skipped: {LONG}"], failed=[f"/runs/a: ValueError: {LONG}"])
    lines = summary.lines()
    assert all(len(line) < 700 for line in lines), [len(line) for line in lines]
    assert any(line.startswith("  flagged /runs/a/images/p0.png") for line in lines)


def test_a_long_failure_message_is_shortened_in_the_render_summary() -> None:
    from render.app import failed_line

    line = failed_line({"describe": "steps=2", "category": "error", "message": f"ValueError: {LONG}",
                        "run_dir": "/runs/a"})
    assert len(line) < 1_200 and line.endswith(f"see {Path('/runs/a/FAILED.json')}")


def test_a_long_path_stays_whole_in_the_score_summary_and_only_what_follows_is_shortened() -> None:
    """A run the user must find by its path (two paths of a run under an xdist worker's folder made the line 300+ characters): the path is never cut."""
    deep = "/tmp/" + "/".join(["a-deep-folder-of-a-worker"] * 6) + "/outputs/multirun/2026-11-30/10-04-12-3fa2/1_steps=8"
    summary = ScoreSummary(failed=[f"{deep}: InvalidRunDirectory: {deep}/run.json: not a readable JSON file",
                                   f"{deep}: ValueError: {LONG}"])
    readable, long = [line for line in summary.lines() if "NOT INDEXED" in line]
    assert readable == f"  NOT INDEXED {deep}: InvalidRunDirectory: {deep}/run.json: not a readable JSON file"
    assert long.startswith(f"  NOT INDEXED {deep}: ValueError: ") and "more characters" in long
