"""The anchor command `assess score` prints renders the anchor cell a run was compared with: the same key.

The copy that drifted left out height, width, guidance and dtype, so a run at another size printed a
command that rendered another cell (whose samples could never be the comparison's reference).
"""

from __future__ import annotations

import shlex

import pytest

from assess.scoring.ingest import render_command
from render.cell import build_job
from render.rundir import RunDir, RunRecord
from render.run.runner import run_json
from tests.conftest import compose_cfg

CELLS = [
    ["model=tiny", "steps=4", "cache=fbcache"],
    ["model=tiny", "height=64", "width=48", "guidance=1.5", "dtype=bfloat16", "attention=math", "scheduler=euler"],
    ["model=tiny", "compile=regional", "quant=int8wo", "offload=layerwise", "fuse_qkv=true", "vae_tiling=true"],
    ["model=shapes", "height=48", "guidance=0.0", "cache=taylorseer"],
]


@pytest.mark.slow
@pytest.mark.parametrize("overrides", CELLS, ids=[" ".join(c) for c in CELLS])
def test_the_printed_anchor_command_composes_the_anchor_cell(overrides: list[str], tmp_path) -> None:
    job = build_job(compose_cfg(*overrides, "device=cpu", out_root=tmp_path))
    run = RunDir(tmp_path, RunRecord.parse(run_json(job, overrides, "test", {}), "run.json"), [], None)
    words = shlex.split(render_command(run, job.seeds))
    assert words[:3] == ["python", "-m", "render"]
    printed = build_job(compose_cfg(*words[3:], "device=cpu", out_root=tmp_path))
    assert printed.cell.key == job.anchor.key
    assert printed.is_anchor
