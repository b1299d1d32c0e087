"""One generation of the climb on each new family's tiny twin, as a user runs it: `assess climb --apply` renders the
generation's cells through `python -m render` and scores them; the next `assess climb` decides from those scores
(real processes, about a minute a twin: slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_families import NEW_TWINS

pytestmark = pytest.mark.slow

# Axes every new family takes (docs/models.md): no cache (Z-Image takes none), the schedulers all of them have.
AXES = ("--set", "experiment.axes.cache=[none]", "--set", "experiment.axes.scheduler=[default,euler]")


def assess(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYPERGRID_INDEX": str(cwd / "outputs" / "index.db"),
           "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "assess", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)


@pytest.mark.parametrize("model", sorted(NEW_TWINS))
def test_a_generation_climbs_on_the_twin(model: str, twin_cache: Path, tmp_path: Path) -> None:
    climb = assess("climb", "tiny-demo", "--set", f"model={model}", *AXES, "--apply", "--generations", "1", cwd=tmp_path)
    assert climb.returncode == 0, climb.stdout[-3000:] + climb.stderr[-3000:]
    (record,) = sorted((tmp_path / "outputs/experiments/tiny-demo/generations").glob("g*.json"))
    generation = json.loads(record.read_text())
    assert generation["commands"] and all(f"model={model}" in c for c in generation["commands"])
    runs = [json.loads(p.read_text()) for p in (tmp_path / "outputs").rglob("run.json")]
    assert runs and {r["cell"]["model"]["name"] for r in runs} == {model}
    assert "scored" in climb.stdout + climb.stderr

    after = assess("climb", "tiny-demo", "--set", f"model={model}", *AXES, cwd=tmp_path)  # decides from the scores
    assert after.returncode == 0, after.stdout[-3000:] + after.stderr[-3000:]
    assert "no cell of the grid has scored samples" not in after.stdout
    assert "generation 2" in after.stdout
