"""The field's metrics on their real code paths, offline, on a random-weight CLIP built locally (values
meaningless, path real): PickScore per sample, CMMD per set with its sample size, and each score's model
identity. A model that cannot be had is unavailable with the reason and the fix."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from assess.metrics.base import SampleInput
from assess.metrics.distribution import CMMDMetric, mmd
from assess.metrics.model_identity import metric_model_identity
from render.rundir import folder_digest
from assess.metrics.preference import PICKSCORE_PROCESSOR, PickScoreMetric
from assess.scoring.ingest import score
from tests.assess.conftest import RunFactory, anchor_image, make_cell, noise, shift


def _features(model, processor, images, texts=None):
    """Independent of the metric code: CLIP's own feature functions, unit-normalised."""
    import torch
    from PIL import Image

    inputs = processor(text=texts or ["x"] * len(images), images=[Image.fromarray(i) for i in images],
                       return_tensors="pt", padding=True)
    with torch.no_grad():
        img = model.get_image_features(pixel_values=inputs["pixel_values"])
        txt = model.get_text_features(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
    img, txt = getattr(img, "pooler_output", img), getattr(txt, "pooler_output", txt)
    return torch.nn.functional.normalize(img, dim=-1), torch.nn.functional.normalize(txt, dim=-1)


def test_pickscore_is_the_models_logit_for_each_prompt(tiny_clip: Path) -> None:
    from transformers import CLIPModel, CLIPProcessor

    items = [SampleInput(f"p{i}", 0, noise(10 * i)(anchor_image(f"p{i}", 0), f"p{i}", 0), text)
             for i, text in enumerate(["a red circle", "a blue square on the left", "an owl"])]
    metric = PickScoreMetric(str(tiny_clip))
    outs = metric.score(items)
    model, processor = CLIPModel.from_pretrained(tiny_clip), CLIPProcessor.from_pretrained(tiny_clip)
    img, txt = _features(model, processor, [i.image for i in items], [i.prompt for i in items])
    expected = model.logit_scale.detach().exp() * (img * txt).sum(-1)
    assert [o.value for o in outs] == pytest.approx([float(v) for v in expected], abs=1e-4)
    assert metric.processor is None  # the folder holds its own processor
    assert metric.config == f"model={metric_model_identity(str(tiny_clip))}"


def test_pickscore_without_its_processor_or_model_is_unavailable_with_the_fix(tiny_clip: Path, tmp_path: Path) -> None:
    weights_only = tmp_path / "PickScore_v1"
    weights_only.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_clip / name, weights_only / name)
    metric = PickScoreMetric(str(weights_only))
    assert metric.processor == PICKSCORE_PROCESSOR  # like the hub checkpoint: LAION's processor is needed
    item = SampleInput("p", 0, anchor_image("p", 0), "a red circle")
    [out] = metric.score([item])
    assert out.value is None and "PickScore model" in out.unavailable_reason
    assert out.unavailable_reason.endswith("pass --metric-model pickscore=<local folder> or set HYPERGRID_PICKSCORE_MODEL")
    [missing] = PickScoreMetric(str(tmp_path / "nothing")).score([item])
    assert missing.value is None and "could not be loaded" in missing.unavailable_reason


def test_mmd_is_the_papers_estimator() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(5, 4)), rng.normal(size=(7, 4)) + 0.5

    def k(a, b):
        return np.exp(-np.sum((a - b) ** 2) / (2 * 10.0**2))

    expected = 1000 * (np.mean([k(a, b) for a in x for b in x]) + np.mean([k(a, b) for a in y for b in y])
                       - 2 * np.mean([k(a, b) for a in x for b in y]))
    assert mmd(x, y) == pytest.approx(expected, rel=1e-9)
    assert mmd(x, x) == pytest.approx(0.0, abs=1e-9)


def test_cmmd_compares_the_sets_clip_embeddings(tiny_clip: Path) -> None:
    from transformers import CLIPModel, CLIPProcessor

    references = [anchor_image(f"p{i}", 0) for i in range(4)]
    images = [noise(40)(r, f"p{i}", 0) for i, r in enumerate(references)]
    metric = CMMDMetric(str(tiny_clip))
    out = metric.score(images, references)
    model, processor = CLIPModel.from_pretrained(tiny_clip), CLIPProcessor.from_pretrained(tiny_clip)
    x, y = (_features(model, processor, s)[0].numpy() for s in (images, references))
    assert out.value == pytest.approx(max(mmd(x, y), 0.0), rel=1e-4, abs=1e-9) and out.detail == "n=4"
    assert metric.score(references, references).value == pytest.approx(0.0, abs=1e-6)
    [one] = [metric.score(images[:1], references[:1])]
    assert one.value is None and one.unavailable_reason == "cmmd needs at least 2 samples paired with the anchor's; 1 found"


def test_cmmd_without_its_model_is_unavailable_with_the_fix(tmp_path: Path) -> None:
    out = CMMDMetric(str(tmp_path / "no-clip")).score([anchor_image("p", 0)] * 2, [anchor_image("q", 0)] * 2)
    assert out.value is None and out.unavailable_reason.startswith("CMMD's CLIP model")
    assert out.unavailable_reason.endswith("pass --metric-model cmmd=<local folder> or set HYPERGRID_CMMD_MODEL")


def test_each_metric_records_its_models_identity(tiny_clip: Path, tmp_path: Path) -> None:
    copy = tmp_path / "same-clip"
    shutil.copytree(tiny_clip, copy)
    assert PickScoreMetric(str(copy)).config == PickScoreMetric(str(tiny_clip)).config  # the same bytes elsewhere
    assert CMMDMetric(str(copy)).config == f"model={metric_model_identity(str(tiny_clip))}"
    assert folder_digest(copy) in CMMDMetric(str(copy)).config
    weights_only = tmp_path / "weights-only"
    weights_only.mkdir()
    shutil.copy(tiny_clip / "config.json", weights_only / "config.json")
    shutil.copy(tiny_clip / "model.safetensors", weights_only / "model.safetensors")
    assert PickScoreMetric(str(weights_only)).config.endswith(f" processor={PICKSCORE_PROCESSOR}")  # not here: by name


def test_scoring_a_sweep_writes_set_scores_with_their_sample_size(outputs: RunFactory, db: Path, tiny_clip: Path) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor")
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(30))
    models = {"cmmd": str(tiny_clip), "pickscore": str(tiny_clip)}
    summary = score([sweep], db, metrics=["cmmd", "pickscore"], metric_models=models)
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        sets = [dict(r) for r in conn.execute("SELECT * FROM set_scores")]
        cell = dict(conn.execute("SELECT value, n, detail FROM cell_scores WHERE metric = 'cmmd'").fetchone())
        picks = conn.execute("SELECT count(*), count(value) FROM scores WHERE metric = 'pickscore'").fetchone()
    (row,) = sets  # the anchor has no set score: it is the reference
    assert row["n"] == 8 and row["value"] is not None and row["config"] == f"model={metric_model_identity(str(tiny_clip))}"
    assert cell == {"value": row["value"], "n": 8, "detail": "n=8"}  # 4 prompts x 2 seeds, each paired
    assert tuple(picks) == (16, 16) and not summary.unavailable  # the anchor's samples too: PickScore needs no reference
    again = score([sweep], db, metrics=["cmmd"], metric_models=models)
    assert again.written == 0 and again.current == 1
