"""assess on what the renderer really writes: a sweep rendered once per session by `python -m render` on the
tiny model, then scored, shown and reported. Drift between writer and reader shows here."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from assess.report.write import write_report
from assess.scoring.ingest import score
from assess.status import status
from render import rundir
from tests.conftest import run_render


@pytest.fixture(scope="session")
def rendered(tiny_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sweep (two cells) and its anchor, rendered once for the session."""
    root = tmp_path_factory.mktemp("rendered")
    result = run_render("-m", "model=tiny", "steps=2,4", "prompts.limit=2", "seed=[0,1]", cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    (sweep,) = (root / "outputs" / "multirun").glob("*/*")
    return sweep


@pytest.mark.slow
def test_every_record_the_renderer_writes_parses_and_verifies(rendered: Path) -> None:
    runs = rundir.load_runs([rendered], with_anchors=True)
    assert len(runs) == 3 and sum(r.is_anchor for r in runs) == 1
    for run in runs:
        assert run.run.schema == rundir.CONTRACT_VERSION and not run.problems
        assert run.terminal is not None and run.terminal.kind == "done"
        assert len(run.samples) == run.n_expected == run.terminal.data["n_samples"] == 4
        assert all(rundir.verify(rundir.ExistingSample(run.path, s)) is None for s in run.samples)


@pytest.mark.slow
def test_status_score_and_report_of_a_rendered_sweep(rendered: Path, tmp_path: Path) -> None:
    rows = status(rendered)
    assert [(r.state, r.n_done, r.n_expected) for r in rows] == [("done", 4, 4)] * 2
    db = tmp_path / "index.db"
    summary = score([rendered], db, metrics=["psnr", "ssim"])
    assert not summary.flagged
    with sqlite3.connect(db) as conn:
        values = conn.execute("SELECT metric, value, unavailable_reason FROM scores").fetchall()
    assert len(values) == 2 * 4 * 2  # two cells against the anchor, 4 samples, 2 fidelity metrics
    assert all(v is not None and reason is None for _, v, reason in values)
    html = write_report([rendered], db, out=tmp_path / "report").read_text()
    keys = {json.loads((run / "run.json").read_text())["cell_key"] for run in rendered.iterdir() if (run / "run.json").exists()}
    assert all(key[:8] in html for key in keys)
