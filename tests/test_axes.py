"""Every attention backend usable on the CPU and every scheduler of the flux family renders the tiny
model in-process through the runner; the others are refused by preflight with what would run."""

from __future__ import annotations

import importlib.util
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


def _on_cuda(*overrides: str) -> tuple[object, object]:
    """A tiny cell composed here, and preflight's view of it as on an H100 (its checks, run on this CPU)."""
    from render.axes.base import Where

    cell = preflight_config(compose_cfg("model=tiny", "device=cpu", *overrides)).cell
    where = Where("cuda:0", "NVIDIA H100 80GB HBM3", cell.model.pipeline)
    where.__dict__["capability"] = (9, 0)  # what Where.capability reads from the GPU
    return cell, where


@pytest.mark.parametrize("backend", [n for n, s in ATTENTION.items() if s.half_on_cuda and not s.package])
def test_a_half_precision_kernel_is_refused_for_a_float32_cell_on_cuda(backend: str) -> None:
    """PyTorch's flash and cuDNN attention take float16/bfloat16 on CUDA (diffusers does not check: the cell failed
    mid-sweep with "No available kernel"); preflight names the dtype and what would run."""
    from render.axes.attention import AXIS
    from render.axes.errors import AxisError

    cell, where = _on_cuda()
    with pytest.raises(AxisError, match=f"attention={backend} runs float16 or bfloat16 on CUDA and this cell's dtype "
                                        "is float32: set dtype=bfloat16, or use attention=native, math, flex"):
        AXIS.check(backend, cell, where)
    AXIS.check(backend, *_on_cuda("dtype=bfloat16"))  # the same backend in bfloat16 passes


def test_fp8dq_is_refused_for_weights_that_are_not_bfloat16() -> None:
    """torchao's per-row float8 asserts "PerRow quantization only works for bfloat16 precision input weight"."""
    from render.axes.errors import AxisError
    from render.axes.quant import AXIS

    cell, where = _on_cuda()
    value = {"name": "fp8dq", "components": ["transformer"]}
    with pytest.raises(AxisError, match="quant=fp8dq quantizes bfloat16 weights and this cell's dtype is float32: "
                                        "set dtype=bfloat16, or use quant=fp8wo or int8wo"):
        AXIS.check(value, cell, where)
    bf16 = _on_cuda("dtype=bfloat16")
    if importlib.util.find_spec("torchao") is not None:  # else the package is what preflight names
        AXIS.check(value, *bf16)


def test_the_twins_render_in_bfloat16_on_cuda_and_float32_on_the_cpu() -> None:
    """The twins stand in for bf16 models on a GPU (a float32 twin failed every half-precision kernel there)."""
    for twin in ("tiny", "tiny-flux2", "tiny-qwen-image", "tiny-z-image", "tiny-wan"):
        assert compose_cfg(f"model={twin}").model.dtype == "bfloat16", twin
        assert preflight_config(compose_cfg(f"model={twin}", "device=cpu")).cell.model.dtype == "float32", twin


def test_flash3_needs_what_diffusers_checks_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """diffusers enables its FA3 backend only where the package `flash_attn_3` is installed: a machine with
    `flash_attn_interface` alone passed preflight, then diffusers refused the backend in the cell."""
    from render.axes import attention

    real = importlib.util.find_spec
    monkeypatch.setattr(attention.importlib.util, "find_spec",
                        lambda name, *a: object() if name == "flash_attn_interface" else
                        None if name == "flash_attn_3" else real(name, *a))
    with pytest.raises(attention.BackendUnavailable, match="attention=flash3 needs the package 'flash_attn_3'"):
        attention.check_attention_usable("flash3", "NVIDIA H100 80GB HBM3", "bfloat16")
