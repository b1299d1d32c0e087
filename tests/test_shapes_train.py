"""Training the shapes model: seeded batches, exact resumption, checkpoint guard, export (toy sizes, fast)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from render.models.shapes.pipeline import ShapesArch, ShapesPipeline
from render.models.shapes.train import (
    CHECKPOINT, TrainConfig, ema_pipeline, export, learning_rate, load_checkpoint, train, training_batch,
)
from render.compose.introspect import pipeline_class

TOY = TrainConfig(steps=4, batch=4, warmup=2, checkpoint_every=2,
                  arch=ShapesArch(num_layers=1, num_single_layers=1, num_heads=1, text_dim=16))


def weights(state) -> dict[str, torch.Tensor]:
    return {**{f"t.{k}": v for k, v in state.pipe.transformer.state_dict().items()},
            **{f"e.{k}": v for k, v in state.ema.items()}}


def test_batches_are_seeded_per_step() -> None:
    a, b, c = training_batch(TOY, 3), training_batch(TOY, 3), training_batch(TOY, 4)
    assert a["captions"] == b["captions"] and torch.equal(a["noise"], b["noise"]) and torch.equal(a["pixels"], b["pixels"])
    assert not torch.equal(a["noise"], c["noise"])
    assert a["pixels"].shape == (4, 3, 32, 32) and -1 <= a["pixels"].min() and a["pixels"].max() <= 1
    assert (a["sigma"] > 0).all() and (a["sigma"] < 1).all()


def test_some_captions_are_dropped_for_guidance() -> None:
    config = dataclasses.replace(TOY, batch=400)
    captions = training_batch(config, 0)["captions"]
    assert 0.05 < captions.count("") / len(captions) < 0.15


def test_learning_rate_warms_up_then_decays_to_the_floor() -> None:
    config = TrainConfig(steps=1000, warmup=100)
    rates = [learning_rate(config, s) for s in range(1000)]
    assert rates[0] < rates[50] < rates[99] == pytest.approx(config.lr)
    assert all(a >= b for a, b in zip(rates[100:], rates[101:]))
    assert learning_rate(config, 1000) == pytest.approx(config.lr * config.min_lr_ratio)


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path: Path) -> None:
    straight = train(TOY, tmp_path / "straight", progress=False)
    train(TOY, tmp_path / "resumed", until=2, progress=False)
    assert load_checkpoint(TOY, tmp_path / "resumed").step == 2
    resumed = train(TOY, tmp_path / "resumed", progress=False)
    assert straight.step == resumed.step == TOY.steps
    a, b = weights(straight), weights(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_checkpoint_of_other_settings_is_not_resumed(tmp_path: Path) -> None:
    train(TOY, tmp_path, until=2, progress=False)
    assert (tmp_path / CHECKPOINT).is_file()
    with pytest.raises(ValueError, match=r"other settings \(lr differ\).*--workdir"):
        load_checkpoint(dataclasses.replace(TOY, lr=1e-2), tmp_path)


def test_export_writes_a_pipeline_that_loads_by_its_dotted_path(tmp_path: Path) -> None:
    state = train(TOY, tmp_path / "work", progress=False)
    pipe = ema_pipeline(state, TOY)
    folder = export(pipe, tmp_path / "weights")
    index = json.loads((folder / "model_index.json").read_text())
    assert index["_class_name"] == "ShapesPipeline"
    assert index["text_encoder"] == ["render.models.shapes.text_encoder", "ShapesTextEncoder"]
    assert sorted(p.suffix for p in folder.rglob("*.safetensors")) == [".safetensors", ".safetensors"]
    loaded = pipeline_class("render.models.shapes.ShapesPipeline").from_pretrained(folder, dtype=torch.float32)
    assert isinstance(loaded, ShapesPipeline)
    kwargs = {"prompt": "a red circle on the left", "num_inference_steps": 3, "output_type": "np"}
    pipe.set_progress_bar_config(disable=True)
    loaded.set_progress_bar_config(disable=True)
    ours = pipe(generator=torch.Generator().manual_seed(0), **kwargs).images
    theirs = loaded(generator=torch.Generator().manual_seed(0), **kwargs).images
    assert np.abs(ours - theirs).max() < 2e-2  # float16 weights on disk
    export(pipe, folder)  # replacing an export leaves one complete folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["weights", "work"]
