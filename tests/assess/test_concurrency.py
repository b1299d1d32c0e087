"""Eight `assess score` processes on overlapping runs: no lost row, no duplicate, no lock error."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from assess.index.database import Index
from assess.scoring.ingest import score
from tests.assess.conftest import RunFactory, make_cell, noise, shift

ROOT = Path(__file__).resolve().parents[2]
TABLES = {
    "runs": "SELECT path, cell_key, status, n_samples, gpu_s FROM runs ORDER BY path",
    "samples": "SELECT cell_key, prompt_id, seed, run_path, problem FROM samples ORDER BY 1, 2, 3",
    "scores": "SELECT cell_key, prompt_id, seed, metric, metric_version, value, unavailable_reason "
              "FROM scores ORDER BY 1, 2, 3, 4",
    "cell_scores": "SELECT cell_key, split, metric, value, unavailable_reason, n FROM cell_scores ORDER BY 1, 2, 3",
}


def snapshot(db: Path) -> dict[str, list[dict]]:
    with Index.open(db) as index:
        return {name: index.query(sql) for name, sql in TABLES.items()}


@pytest.mark.slow
def test_eight_concurrent_scorers(outputs: RunFactory, tmp_path: Path) -> None:
    """PSNR only (no torch import), so eight processes fit in the default test run."""
    _race(outputs, tmp_path, "psnr")


@pytest.mark.slow
def test_eight_concurrent_scorers_with_ssim(outputs: RunFactory, tmp_path: Path) -> None:
    _race(outputs, tmp_path, "psnr,ssim")


def _race(outputs: RunFactory, tmp_path: Path, metrics: str) -> None:
    sweep = outputs.sweep()
    anchor = outputs.anchor(sweep)
    cells = [outputs.run(sweep, f"{i}_steps={i}", make_cell(steps=i), overrides=[f"steps={i}"],
                         perturb=shift(i) if i % 2 else noise(i), terminal="done" if i != 5 else "failed", n_done=None)
             for i in range(1, 7)]
    rng = random.Random(0)
    jobs = []
    for n in range(8):
        subset = rng.sample(cells, 3)
        paths = ([anchor] if n < 6 else []) + subset  # two scorers race without the anchor in their paths
        jobs.append(paths)
    for cell in cells:  # every cell is scored by at least one process that also ingests the anchor
        if not any(cell in j for j in jobs[:6]):
            jobs[0].append(cell)
    db = tmp_path / "concurrent.db"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    procs = [
        subprocess.Popen([sys.executable, "-m", "assess", "score", *map(str, paths), "--db", str(db),
                          "--metrics", metrics, "-q"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
        for paths in jobs
    ]
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    for rc, out, err in results:
        assert rc == 0, err
        assert "locked" not in err and "Traceback" not in err
        assert out.startswith("scored ")
    serial = tmp_path / "serial.db"
    score([sweep], serial, metrics=metrics.split(","))
    assert snapshot(db) == snapshot(serial)
    with Index.open(db) as index:
        [dupes] = index.query("SELECT count(*) - count(DISTINCT cell_key || prompt_id || seed || metric) AS n "
                              "FROM scores")
        assert dupes["n"] == 0
        assert index.query("SELECT count(*) AS n FROM scores WHERE value IS NULL") == [{"n": 0}]
