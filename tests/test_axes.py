"""Every attention backend usable on the CPU and every scheduler of the flux family renders the tiny
model in-process through the runner; the others are refused by preflight with what would run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from render.app import PIPELINES
from render.axes.attention import BACKENDS as ATTENTION
from render.cell import build_job
from render.run.preflight import PreflightError, preflight_config
from render.rundir import SampleStore
from render.run.runner import run_job
from render.models.families import family
from tests.conftest import compose_cfg

CPU_BACKENDS = [name for name, spec in ATTENTION.items() if not spec.needs_cuda]


def render_one(tmp_path: Path, *overrides: str) -> np.ndarray:
    cfg = compose_cfg("model=tiny", "device=cpu", "prompts.limit=1", "steps=4", "render_anchor=false", *overrides, out_root=tmp_path)
    job = build_job(cfg)
    run_dir = tmp_path / "run"
    (result,) = run_job(job, run_dir, store=SampleStore(tmp_path), pipelines=PIPELINES, overrides=list(overrides))
    assert result.status == "done", result.message
    record = json.loads((run_dir / "samples.jsonl").read_text().splitlines()[0])
    return np.asarray(Image.open(run_dir / record["image"]), dtype=np.float32)


@pytest.mark.slow
@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_cpu_attention_backends_render(backend: str, tiny_cache: Path, tmp_path: Path) -> None:
    image = render_one(tmp_path, f"attention={backend}")
    baseline = render_one(tmp_path / "native", "attention=native")
    assert np.isfinite(image).all() and image.std() > 1
    assert np.abs(image - baseline).mean() < 1.0  # same math up to rounding


@pytest.mark.parametrize("backend", [n for n, s in ATTENTION.items() if s.needs_cuda])
def test_gpu_only_backends_fail_in_preflight(backend: str) -> None:
    with pytest.raises(PreflightError, match=f"attention={backend} needs a CUDA GPU.*usable here: native, math, flex"):
        preflight_config(compose_cfg("model=tiny", "device=cpu", f"attention={backend}"))


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", sorted(family("flux").schedulers))
def test_flux_schedulers_render_and_change_the_image(scheduler: str, tiny_cache: Path, tmp_path: Path) -> None:
    image = render_one(tmp_path, f"scheduler={scheduler}")
    default = render_one(tmp_path / "default", "scheduler=default")
    assert np.isfinite(image).all()
    if scheduler != "euler":  # euler is the tiny model's own scheduler: the same image
        assert np.abs(image - default).mean() > 0.01
    else:
        assert np.array_equal(image, default)
