"""A tiny-model sweep on the project suite, rendered by `python -m render` and scored with every metric:
each score a value or unavailable with its reason; the prompts' categories reach the records, the index,
the report and `assess status --json`."""

from __future__ import annotations

import pytest
import json
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from assess.cli import cli
from assess.metrics.ocr import quoted_text
from render.compose.metric_registry import SPECS, scored_metric_names
from render import rundir
from render.compose.splits import load_prompts
from tests.conftest import run_render

LIMIT = 4


@pytest.mark.slow
def test_a_sweep_on_the_project_suite_scored_with_every_metric(tiny_cache: Path, tiny_clip: Path, tmp_path: Path) -> None:
    result = run_render("-m", "model=tiny", "prompts=suite-dev", f"prompts.limit={LIMIT}", "steps=2,4", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    (sweep,) = (tmp_path / "outputs" / "multirun").glob("*/*")
    suite = {p.id: p.category for p in load_prompts("suite-dev.jsonl", LIMIT)}
    for run in rundir.load_runs([sweep], with_anchors=True):
        assert {s.prompt_id: s.category for s in run.samples} == suite

    db = tmp_path / "index.db"
    models = [f"--metric-model=pickscore={tiny_clip}", f"--metric-model=cmmd={tiny_clip}"]
    scored = CliRunner().invoke(cli, ["score", str(sweep), "--db", str(db), "--clip-model", str(tiny_clip), *models],
                                catch_exceptions=False)
    assert scored.exit_code == 0, scored.output
    with sqlite3.connect(db) as conn:
        scores = conn.execute("SELECT metric, value, unavailable_reason FROM scores").fetchall()
        sets = conn.execute("SELECT metric, value, unavailable_reason, n FROM set_scores").fetchall()
        labels = dict(conn.execute("SELECT DISTINCT prompt_id, category FROM samples").fetchall())
    assert labels == suite
    clips_only = {name for name in scored_metric_names() if SPECS[name].clips_only}  # an image has no temporal score
    assert clips_only == {"temporal_ssim"}
    other_model = {name for name in scored_metric_names() if SPECS[name].pipelines}  # the shapes model's own checker
    assert other_model == {"shapes", "shapes_fit"}
    texts = [p.text for p in load_prompts("suite-dev.jsonl", LIMIT)]
    if not any(quoted_text(t) for t in texts):  # the OCR metrics read text prompts only: none among these
        other_model |= {name for name in scored_metric_names() if SPECS[name].text_prompts_only}
    assert {m for m, *_ in scores} | {m for m, *_ in sets} == set(scored_metric_names()) - clips_only - other_model
    assert all((v is None) != (why is None) for _, v, why in scores)
    for metric in ("ssim", "psnr", "clip_score", "pickscore"):
        assert all(v is not None for m, v, _ in scores if m == metric), metric
    assert [(m, n) for m, v, _, n in sets if v is not None] == [("cmmd", LIMIT)] * 2  # two cells vs the anchor

    report = CliRunner().invoke(cli, ["report", str(sweep), "--db", str(db), "--quality-metric", "ssim", "--band", "0.5"],
                                catch_exceptions=False)
    html = Path(report.output.splitlines()[0]).read_text()  # its path first, then its winner file and speed notes
    assert "Per category (ssim)" in html and all(c in html for c in set(suite.values())) and "CMMD" in html
    status = CliRunner().invoke(cli, ["status", str(sweep), "--json", "--db", str(db), "--quality-metric", "ssim"],
                                catch_exceptions=False)
    quality = [r["quality"]["dev"] for r in json.loads(status.output) if "quality" in r]
    assert len(quality) == 2 and all({c["category"] for c in q["categories"]} == set(suite.values()) for q in quality)
