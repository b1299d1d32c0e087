"""Metrics on known inputs: identical images, a known perturbation, unavailable outcomes."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from assess.errors import UnknownMetric
from render import rundir
from assess.metrics import SPECS, Outcome, SampleInput, build_sample_metrics
from render.compose.metric_registry import scored_metric_names
from assess.metrics.alignment import CLIPScoreMetric
from assess.metrics.fidelity import LPIPSMetric, PSNRMetric, SSIMMetric, psnr_identical
from assess.metrics.speed import cell_speed, percentile, run_gpu_s
from tests.assess.conftest import anchor_image, expected_psnr_shift, noise, shift


def pair(perturb, prompt_id: str = "smoke-000", seed: int = 0, size: int = 32) -> SampleInput:
    ref = anchor_image(prompt_id, seed, size)
    return SampleInput(prompt_id, seed, perturb(ref, prompt_id, seed), "a red circle", reference=ref)


def test_every_metric_has_a_complete_spec() -> None:
    for name, spec in SPECS.items():
        assert spec.name == name
        assert spec.direction in ("higher", "lower")
        assert spec.version >= 1 and spec.description


def test_psnr_identical_images_is_the_documented_finite_ceiling() -> None:
    [out] = PSNRMetric().score([pair(lambda im, p, s: im.copy())])
    assert out.value == pytest.approx(10 * math.log10(2 * 255**2 * 32 * 32 * 3))
    assert out.value == psnr_identical(32 * 32 * 3)
    assert out.detail == "identical"


def test_identical_ceiling_is_above_any_nonidentical_psnr() -> None:
    image = anchor_image("smoke-000", 0)
    one_off = image.copy()
    one_off[0, 0, 0] += 1
    [identical, closest] = PSNRMetric().score([
        SampleInput("a", 0, image, None, reference=image.copy()),
        SampleInput("b", 0, one_off, None, reference=image),
    ])
    assert closest.value == pytest.approx(10 * math.log10(255**2 * image.size))
    assert identical.value == pytest.approx(closest.value + 10 * math.log10(2))


@pytest.mark.parametrize("delta", [1, 10, 20])
def test_psnr_of_a_known_shift(delta: int) -> None:
    outs = PSNRMetric().score([pair(shift(delta), f"smoke-00{i}") for i in range(3)])
    for out in outs:
        assert out.value == pytest.approx(expected_psnr_shift(delta), rel=1e-12)
        assert out.detail is None


def test_psnr_equals_torchmetrics() -> None:
    import torch
    from torchmetrics.functional.image import peak_signal_noise_ratio

    items = [pair(noise(s), f"smoke-00{i}") for i, s in enumerate((1, 5, 40))]
    outs = PSNRMetric().score(items)
    for item, out in zip(items, outs, strict=True):
        expected = peak_signal_noise_ratio(torch.from_numpy(item.image).double(), torch.from_numpy(item.reference).double(),
                                           data_range=255.0)
        assert out.value == pytest.approx(float(expected), rel=1e-6)  # torchmetrics rounds in float32


def test_ssim_identical_is_one_and_perturbations_lower_it() -> None:
    same, shifted, noisy = SSIMMetric().score([pair(lambda im, p, s: im.copy()), pair(shift(10)), pair(noise(30))])
    assert same.value == pytest.approx(1.0)
    assert noisy.value < shifted.value < 1.0


def test_ssim_on_an_image_smaller_than_its_window_is_unavailable() -> None:
    [out] = SSIMMetric().score([pair(shift(5), size=8)])
    assert out.value is None
    assert out.unavailable_reason == "image is 8x8, smaller than SSIM's 11x11 window"


def test_reference_metrics_without_a_reference_are_unavailable_with_the_given_reason() -> None:
    item = SampleInput("smoke-000", 0, anchor_image("smoke-000", 0), None, reference=None,
                       reference_missing="anchor sample missing; render it with: python -m render ...")
    for metric in (PSNRMetric(), SSIMMetric(), LPIPSMetric()):
        [out] = metric.score([item])
        assert out == Outcome.unavailable("anchor sample missing; render it with: python -m render ...")


def test_a_reference_of_another_size_is_never_compared() -> None:
    item = SampleInput("smoke-000", 0, anchor_image("smoke-000", 0, 32), None, reference=anchor_image("smoke-000", 0, 16))
    [out] = PSNRMetric().score([item])
    assert out.unavailable_reason == "anchor image is 16x16, this sample is 32x32: not comparable"


def test_lpips_is_unavailable_with_a_reason_when_its_network_is_not_at_hand() -> None:
    [out] = LPIPSMetric().score([pair(shift(10))])
    try:
        import torchvision  # noqa: F401
    except Exception:
        assert out.value is None
        assert out.unavailable_reason.startswith("LPIPS needs torchvision, which is not installed.")
    else:  # pragma: no cover - only where torchvision and the AlexNet weights are installed
        assert out.value is not None or "not at hand" in out.unavailable_reason


@pytest.mark.parametrize("bad", [dict(value=float("nan")), dict(value=float("inf")), dict(value=None),
                                 dict(value=1.0, unavailable_reason="x")])
def test_outcome_refuses_stand_ins(bad: dict) -> None:
    with pytest.raises(ValueError):
        Outcome(**bad)


def test_unknown_metric_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownMetric) as err:
        build_sample_metrics(["psnr", "fid"])
    assert str(err.value) == f"unknown metric(s): fid. Valid metrics are: {', '.join(scored_metric_names())}"


def test_clip_score_with_a_tiny_local_model(tiny_clip: Path) -> None:
    import torch
    from transformers import CLIPModel, CLIPProcessor

    metric = CLIPScoreMetric(str(tiny_clip))
    items = [pair(noise(5), f"smoke-00{i}") for i in range(3)]
    items[1].prompt = "a blue square"
    outs = metric.score(items)
    assert metric.config == f"model={rundir.folder_digest(tiny_clip)}"  # the model by its content
    # Independent computation: the projected features, normalised, cosine, x100, clamped at 0.
    model, processor = CLIPModel.from_pretrained(tiny_clip), CLIPProcessor.from_pretrained(tiny_clip)
    from PIL import Image

    for item, out in zip(items, outs, strict=True):
        inputs = processor(text=[item.prompt], images=[Image.fromarray(item.image)], return_tensors="pt", padding=True)
        with torch.no_grad():
            img = model.get_image_features(pixel_values=inputs["pixel_values"])
            txt = model.get_text_features(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
        img = getattr(img, "pooler_output", img)
        txt = getattr(txt, "pooler_output", txt)
        cos = torch.nn.functional.cosine_similarity(img, txt).item()
        assert out.value == pytest.approx(max(100 * cos, 0.0), abs=1e-3)
        assert 0.0 <= out.value <= 100.0


def test_clip_score_without_a_loadable_model_is_unavailable(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-clip"
    [out] = CLIPScoreMetric(str(missing)).score([pair(shift(1))])
    assert out.value is None
    assert out.unavailable_reason.startswith(f"CLIP model '{missing}' could not be loaded (")
    assert "; pass --clip-model <local folder> or set HYPERGRID_CLIP_MODEL, or leave clip_score out" in out.unavailable_reason


def test_clip_score_without_prompt_text_is_unavailable(tiny_clip: Path) -> None:
    item = pair(shift(1))
    item.prompt = None
    [out] = CLIPScoreMetric(str(tiny_clip)).score([item])
    assert out.unavailable_reason == "samples.jsonl has no prompt text for this sample"


def _row(latency: float | None, warmup: bool = False, reused: str | None = None, **kw) -> dict:
    base = {"latency_s": latency, "warmup": warmup, "s_per_step": None if latency is None else latency / 10,
            "steps": 10, "peak_mem_bytes": 100, "mem_kind": "cpu-rss-hwm", "load_s": 2.0, "reused_from": reused}
    return {**base, **kw}


def test_speed_of_a_cell() -> None:
    rows = [_row(5.0, warmup=True), _row(1.0), _row(2.0), _row(3.0, peak_mem_bytes=300), _row(4.0)]
    out = cell_speed(rows, gpu_s=17.0)
    assert out["latency_median_s"].value == 2.5
    assert out["latency_p90_s"].value == pytest.approx(float(np.percentile([1, 2, 3, 4], 90)))
    assert out["images_per_s"].value == pytest.approx(4 / 10)
    assert out["s_per_step"].value == pytest.approx(0.25)
    assert out["peak_mem_bytes"].value == 300 and out["peak_mem_bytes"].detail == "cpu-rss-hwm"
    assert out["load_s"].value == 2.0
    assert out["gpu_s"].value == 17.0


def test_speed_without_warm_samples_is_unavailable_not_zero() -> None:
    out = cell_speed([_row(5.0, warmup=True)], gpu_s=7.0)
    for name in ("latency_median_s", "latency_p90_s", "images_per_s", "s_per_step"):
        assert out[name].value is None
        assert "no warm sample" in out[name].unavailable_reason


def test_reused_samples_cost_nothing() -> None:
    class S:
        def __init__(self, latency: float, load: float, reused: str | None) -> None:
            self.latency_s, self.load_s, self.reused_from = latency, load, reused
            self.device_s = latency  # SampleRecord.device_s: one call

    assert run_gpu_s([S(1.0, 3.0, None), S(2.0, 3.0, None), S(9.0, 0.0, "runs/x")]) == 6.0
    assert run_gpu_s([S(9.0, 5.0, "runs/x")]) == 0.0


def test_percentile_matches_numpy() -> None:
    values = [0.3, 0.1, 0.5, 0.9, 0.2, 0.7]
    for q in (0, 10, 50, 90, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
