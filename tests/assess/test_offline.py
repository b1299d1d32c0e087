"""Offline without stalls: the hub is unreachable here (no network), which is the real code path."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from assess.metrics import alignment, clipmodels
from assess.metrics.alignment import DEFAULT_CLIP_MODEL, CLIPScoreMetric, hub_reachable
from assess.metrics.fidelity import LPIPSMetric, torchvision_install_line
from assess.scoring.ingest import score
from tests.assess.conftest import RunFactory, make_cell, shift


@pytest.fixture
def online_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A user who set no offline variable, on a machine without network; no CLIP model loaded yet."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr(clipmodels, "_LOADED", {})
    if hub_reachable():
        pytest.skip("the hub is reachable from here: this test needs it unreachable")


@pytest.mark.usefixtures("online_env")
def test_an_uncached_clip_model_is_unavailable_at_once_with_the_fix(outputs: RunFactory, db: Path,
                                                                     capfd: pytest.CaptureFixture[str]) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor")
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(3))
    summary = score([sweep], db, metrics=["clip_score"])
    [(metric, reason)] = summary.unavailable
    assert metric == "clip_score" and summary.unavailable[(metric, reason)] == summary.samples
    assert reason.startswith(f"CLIP model '{DEFAULT_CLIP_MODEL}' is not in the local Hugging Face cache")
    assert f"hf download {DEFAULT_CLIP_MODEL}" in reason and "--clip-model <local folder>" in reason
    assert "--metrics psnr,ssim,lpips,shapes,shapes_fit,pickscore,imagereward,ocr,ocr_prompt,temporal_ssim,cmmd" in reason
    printed = capfd.readouterr()
    assert "Retry" not in printed.out + printed.err and "thrown while requesting" not in printed.err


@pytest.mark.usefixtures("online_env")
def test_a_local_folder_loads_without_the_offline_variable(tiny_clip: Path) -> None:
    item = alignment.SampleInput("p", 0, __import__("numpy").zeros((32, 32, 3), "uint8"), "a red circle")
    [out] = CLIPScoreMetric(str(tiny_clip)).score([item])
    assert out.available


def test_the_lpips_hint_keeps_the_users_torch() -> None:
    assert torchvision_install_line("2.13.0+cpu") == (
        "pip install --no-deps torchvision==0.28.0 --index-url https://download.pytorch.org/whl/cpu")
    assert torchvision_install_line("2.5.1+cu124").startswith("pip install --no-deps torchvision==0.20.1 ")
    assert torchvision_install_line("2.6.0") == "pip install --no-deps torchvision==0.21.0"
    if importlib.util.find_spec("torchvision") is not None:
        pytest.skip("torchvision is installed here")
    import numpy as np
    import torch

    image = np.zeros((32, 32, 3), np.uint8)
    [out] = LPIPSMetric().score([alignment.SampleInput("p", 0, image, "x", reference=image)])
    assert f"`{torchvision_install_line(torch.__version__)}`" in out.unavailable_reason
    assert "`pip install torchvision`" not in out.unavailable_reason.split("(a plain")[0]
