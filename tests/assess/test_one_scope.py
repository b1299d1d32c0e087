"""Issue 30, item 6: one scope everywhere. `assess status --json`, the report and the exports of a sweep cover
exactly that sweep's prompts and seeds, though the index holds other sweeps' samples of the same cell key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from assess.export.selection import sweep_runs
from assess.index.database import Index
from assess.report.write import sweep_cells
from assess.scoring.ingest import score
from tests.conftest import run_render

pytestmark = pytest.mark.slow  # two real renders of the tiny model


def test_status_report_and_exports_cover_exactly_the_sweeps_samples(tiny_cache: Path, tmp_path: Path) -> None:
    sweeps = []
    for args in (["seed=1", "prompts.limit=2"], ["seed=2", "prompts.limit=4"]):  # the same cell, other samples
        before = set((tmp_path / "outputs" / "multirun").glob("*/*"))
        result = run_render("-m", "model=tiny", "steps=4", *args, cwd=tmp_path, env_extra={"HF_HUB_OFFLINE": "1"})
        assert result.returncode == 0, result.stderr[-3000:]
        [sweep] = set((tmp_path / "outputs" / "multirun").glob("*/*")) - before
        sweeps.append(sweep)
    db = tmp_path / "index.db"
    score([tmp_path / "outputs"], db, metrics=["ssim"])
    sweep = sweeps[0]
    [run] = [json.loads(p.read_text()) for p in sweep.glob("*/run.json") if not json.loads(p.read_text())["is_anchor"]]
    asked = len(run["prompts"]["ids"]) * len(run["seeds"])
    assert asked == 2

    status = CliRunner().invoke(cli, ["status", str(sweep), "--json", "--db", str(db)], catch_exceptions=False)
    assert status.exit_code == 0, status.output
    [record] = [r for r in json.loads(status.output) if r["cell_key"] == run["cell_key"]]
    overall = record["quality"][run["prompts"]["split"]]["overall"]

    with Index.open(db, create=False) as index:
        views, _ = sweep_cells(index, [sweep])
    [view] = [v for v in views if v.cell_key == run["cell_key"]]
    exported = next(r for r in sweep_runs(sweep, db, tmp_path / "work") if r.tags.get("hypergrid.cell_key") == run["cell_key"])

    assert overall["n"] == len(run["prompts"]["ids"])  # per prompt, this sweep's prompts only
    assert view.n_samples == view.n_expected == asked
    assert exported.metrics["samples"] == asked and exported.metrics["ssim/mean/n"] == asked
    assert overall["value"] + 1.0 == pytest.approx(exported.metrics["ssim/mean"])  # SSIM delta = SSIM - 1
