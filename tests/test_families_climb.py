"""One generation of the climb on each new family's tiny twin, as a user runs it: `assess climb --apply` renders the
generation's cells through `python -m render` and scores them; the next `assess climb` decides from those scores
(real processes, 12-20 s a twin: slow)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_families import NEW_TWINS

pytestmark = pytest.mark.slow

# Axes every new family takes (docs/models.md): no cache (Z-Image takes none), the schedulers all of them have. The
# generation is as small as its promise allows: the start and its one neighbour (scheduler=euler) at 2 steps on 2
# prompts, one `python -m render` sweep a twin (it was steps 4, 8, 12 and euler on 4 prompts, two sweeps: 17-28 s
# a twin; that the twins render every step count and scheduler is test_families.py's).
AXES = ("--set", "experiment.axes.cache=[none]", "--set", "experiment.axes.scheduler=[default,euler]",
        "--set", "experiment.axes.steps=[2]", "--set", "experiment.start.steps=2", "--set", "experiment.rungs=[2,6,18]")


def assess(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYPERGRID_INDEX": str(cwd / "outputs" / "index.db"),
           "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "assess", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)


@pytest.mark.parametrize("model", sorted(NEW_TWINS))
def test_a_generation_climbs_on_the_twin(model: str, twin_cache: Path, tmp_path: Path) -> None:
    climb = assess("climb", "tiny-demo", "--set", f"model={model}", *AXES, "--apply", "--generations", "1", cwd=tmp_path)
    output = climb.stdout + climb.stderr
    assert climb.returncode == 0, f"{model}: `assess climb --apply` runs a generation: {output[-3000:]}"
    (record,) = sorted((tmp_path / "outputs/experiments/tiny-demo/generations").glob("g*.json"))
    generation = json.loads(record.read_text())
    assert generation["commands"] and all(f"model={model}" in c for c in generation["commands"]), \
        f"{model}: the generation's commands render the twin: {generation['commands']}"
    runs = [json.loads(p.read_text()) for p in (tmp_path / "outputs").rglob("run.json")]
    assert len(runs) >= 2 and {r["cell"]["model"]["name"] for r in runs} == {model}, \
        f"{model}: the generation's cells were rendered on the twin: {[r['cell']['model']['name'] for r in runs]}"
    # score's summary line (the bare word also appears in "no cell of the grid has scored samples", which the first
    # climb prints before it renders: a check on the word alone passed with scoring cut out)
    assert re.search(r"scored \d+ run\(s\), \d+ sample\(s\)", output), \
        f"{model}: the generation's cells were scored: {output[-3000:]}"

    after = assess("climb", "tiny-demo", "--set", f"model={model}", *AXES, cwd=tmp_path)  # decides from the scores
    assert after.returncode == 0, f"{model}: the next `assess climb` decides: {after.stdout[-3000:]}{after.stderr[-3000:]}"
    assert "no cell of the grid has scored samples" not in after.stdout and "generation 2" in after.stdout, \
        f"{model}: the next climb decides generation 2 from the generation's scores: {after.stdout[-3000:]}"
