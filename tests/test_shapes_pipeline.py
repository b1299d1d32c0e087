"""The shipped shapes pipeline through the runner's code: loading, the runner's call, schedulers, caches.

Fast: the trained pipeline is 3.6M parameters at 32x32, a render of 16 steps takes well under a second.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from assess.metrics.shapes import check
from render.axes.caches import CACHES, caches_taken
from render.axes.caches.fastercache import runs_branches_separately
from render.models.shapes import WEIGHTS_DIR, shapes_model_dir
from assess.metrics.tradeoff import as_loaded, compose_job, load_shipped, render_job
from render.models.shapes.pipeline import ShapesPipeline, patchify, unpatchify
from render.run.loader import call_kwargs, configure
from render.run.runner import render_sample
from render.models.families import family

SMOKE = ["prompts=smoke", "seed=0"]
STEPS = 16
METHODS = [name for name in caches_taken("render.models.shapes.ShapesPipeline", "flux") if name != "none"]  # every cache it takes
REFUSED = sorted(set(CACHES) - set(METHODS) - {"none"})  # the caches diffusers gives no Flux-style pipeline


@pytest.fixture(scope="module")
def loaded():
    return load_shipped(compose_job(*SMOKE))


@pytest.fixture(autouse=True)
def fresh_configuration(loaded):
    loaded.configured_for = None  # every test configures the pipeline for its own cell
    yield


def images(loaded, job) -> np.ndarray:
    return np.stack([s.image for s in render_job(loaded, job)])


def test_shipped_weights_are_small_safetensors_loaded_by_dotted_path(loaded) -> None:
    files = [p for p in WEIGHTS_DIR.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) <= 20_000_000
    assert {p.suffix for p in files} == {".json", ".safetensors"}
    assert shapes_model_dir() == WEIGHTS_DIR
    assert isinstance(loaded.pipe, ShapesPipeline)
    assert json.loads((WEIGHTS_DIR / "model_index.json").read_text())["_class_name"] == "ShapesPipeline"
    assert loaded.pipe.transformer.dtype == torch.float32


@pytest.mark.slow
def test_the_anchor_draws_what_the_smoke_prompts_ask_for(loaded) -> None:
    """A broken checkpoint or loader fails here: fixed seed, the anchor's settings, the checker's verdicts."""
    job = compose_job(*SMOKE)
    anchor = compose_job(*SMOKE, f"steps={job.anchor.steps}")
    assert anchor.is_anchor
    samples = render_job(loaded, anchor)
    verdicts = [check(s.image, s.prompt) for s in samples]
    assert [v.correct for v in verdicts] == [True] * 6, [v.detail() for v in verdicts]
    assert np.mean([v.fit for v in verdicts]) > 0.8


@pytest.mark.slow
def test_the_runners_call_is_deterministic_per_seed(loaded) -> None:
    job = compose_job("prompts=smoke", "seed=[0,1]", f"steps={STEPS}")
    configure(loaded, job.cell, calibrate=None)
    kwargs = call_kwargs(job.cell, job.prompts[0].text, 0)
    assert set(kwargs) == {"prompt", "num_inference_steps", "guidance_scale", "height", "width", "generator", "output_type"}
    first, *_ = render_sample(loaded, job, job.prompts[0].text, 0)
    again, *_ = render_sample(loaded, job, job.prompts[0].text, 0)
    other, *_ = render_sample(loaded, job, job.prompts[0].text, 1)
    assert first == again and first != other


def test_guidance_runs_both_branches_in_their_cache_contexts(loaded, monkeypatch) -> None:
    job = compose_job(*SMOKE)
    configure(loaded, job.cell, calibrate=None)
    pipe = loaded.pipe
    contexts, timesteps = [], []
    original = pipe.transformer.cache_context

    def spy(name):
        contexts.append(name)
        timesteps.append(float(pipe.current_timestep))
        return original(name)

    monkeypatch.setattr(pipe.transformer, "cache_context", spy)
    pipe("a red circle in the centre", num_inference_steps=3, guidance_scale=3.0, output_type="np")
    assert contexts == ["cond", "uncond"] * 3
    assert timesteps[::2] == [float(t) for t in pipe.scheduler.timesteps] and timesteps[0] == 1000.0
    assert pipe.current_timestep is None
    contexts.clear()
    pipe("a red circle in the centre", num_inference_steps=3, guidance_scale=1.0, output_type="np")
    assert contexts == ["cond"] * 3  # no guidance: no unconditional branch


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", ["default", *family("flux").schedulers])
def test_every_flux_scheduler_renders_the_prompt(loaded, scheduler: str) -> None:
    job = compose_job(*SMOKE, f"steps={STEPS}", f"scheduler={scheduler}")
    samples = render_job(loaded, job)
    assert type(loaded.pipe.scheduler).__name__ == (
        "FlowMatchEulerDiscreteScheduler" if scheduler == "default" else family("flux").schedulers[scheduler].cls)
    assert float(loaded.pipe.scheduler.sigmas[0]) == pytest.approx(1.0, abs=2e-3)  # starts from pure noise
    verdicts = [check(s.image, s.prompt) for s in samples]
    assert all(v.colour for v in verdicts), [v.detail() for v in verdicts]
    assert sum(v.correct for v in verdicts) >= 3, [v.detail() for v in verdicts]


@pytest.mark.slow
@pytest.mark.parametrize("name", METHODS)
def test_every_cache_method_applies_and_resets(loaded, name: str) -> None:
    baseline = images(loaded, compose_job(*SMOKE, f"steps={STEPS}"))
    job = compose_job(*SMOKE, f"steps={STEPS}", f"cache={name}")
    cached = images(loaded, job)
    assert loaded.pipe.transformer.is_cache_enabled
    assert np.abs(cached.astype(int) - baseline).mean() > 0.01, f"{name} left every image unchanged"
    loaded.configured_for = None
    assert np.array_equal(images(loaded, job), cached), "cache state leaked from one render into the next"
    assert np.array_equal(images(loaded, compose_job(*SMOKE, f"steps={STEPS}")), baseline)


def test_fastercache_auto_mode_sees_separate_guidance_branches(loaded) -> None:
    assert ShapesPipeline.runs_guidance_branches_separately
    assert runs_branches_separately(loaded.pipe)


@pytest.mark.parametrize("name", METHODS)
def test_preflight_accepts_every_cache_for_the_shapes_model(name: str) -> None:
    from render.run.preflight import check_job

    check_job(compose_job(*SMOKE, f"cache={name}"))


@pytest.mark.parametrize("name", REFUSED)
def test_preflight_refuses_the_caches_it_cannot_take_naming_those_it_can(name: str) -> None:
    from render.run.preflight import check_job

    with pytest.raises(Exception, match=f"valid: {', '.join(['none', *METHODS])}"):
        check_job(compose_job(*SMOKE, f"cache={name}"))


def test_patches_round_trip() -> None:
    x = torch.randn(2, 3, 32, 32)
    assert torch.equal(unpatchify(patchify(x, 4), 4, 32, 32), x)
    assert patchify(x, 4).shape == (2, 64, 48)


def test_unknown_words_and_long_captions(loaded) -> None:
    encoder = loaded.pipe.text_encoder
    ids = encoder.tokenize(["a red circle in the centre", "a crimson circle", ""], max_length=4)
    assert ids.shape == (3, 4)
    assert ids[1, 1].item() == 1 and ids[2].tolist() == [0, 0, 0, 0]  # unknown, padding
    assert encoder.unknown_words("a crimson circle") == ["crimson"]


def test_other_sizes_must_be_multiples_of_the_patch(loaded) -> None:
    pipe = loaded.pipe
    assert pipe("a red circle in the centre", num_inference_steps=2, height=48, width=64, output_type="np").images.shape == (1, 48, 64, 3)
    with pytest.raises(ValueError, match="multiples of the patch size 4"):
        pipe("a red circle in the centre", num_inference_steps=2, height=30, output_type="np")


@pytest.mark.slow
def test_an_in_memory_pipeline_configures_like_a_loaded_one(loaded) -> None:
    """A pipeline built in memory (training) has no scheduler `_class_name` until saved; as_loaded supplies it."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    scheduler = FlowMatchEulerDiscreteScheduler(**{k: v for k, v in loaded.scheduler_config.items() if not k.startswith("_")})
    pipe = ShapesPipeline(transformer=loaded.pipe.transformer, scheduler=scheduler, text_encoder=loaded.pipe.text_encoder)
    job = compose_job(*SMOKE, f"steps={STEPS}")
    assert np.array_equal(images(as_loaded(pipe), job), images(loaded, job))
