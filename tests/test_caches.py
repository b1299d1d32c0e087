"""The cache registry on the tiny model: every method changes the image, and reset restores it exactly."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from omegaconf import OmegaConf
from omegaconf.errors import ConfigAttributeError

import render.axes.caches as caches
from render.axes.caches import (
    CACHES,
    CacheConfigError,
    NoCacheConf,
    apply_cache,
    caches_taken,
    cache_key_params,
    check_cache_supported,
    reset_cache,
)
from render.axes.caches._base import CacheSchema
from render.axes.caches._support import leftover_hooks
from render.axes.caches.fastercache import FasterCacheConf
from render.axes.caches.fbcache import FBCacheConf
from render.axes.caches.magcache import MagCacheConf
from render.axes.caches.pab import PABConf
from render.axes.caches.taylorseer import TaylorSeerConf
from render.models.tiny import TINY_CALL_KWARGS, tiny_model_dir

STEPS = 8
METHODS = [name for name in caches_taken("FluxPipeline", "flux") if name != "none"]  # those the tiny FLUX model runs
CONF_DIR = Path(caches.__file__).parents[2] / "conf" / "cache"


@pytest.fixture(scope="module")
def pipe(tiny_cache: Path):
    from diffusers import FluxPipeline

    pipe = FluxPipeline.from_pretrained(tiny_model_dir(tiny_cache))
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.fixture(scope="module")
def baseline(pipe) -> np.ndarray:
    return render(pipe)


@pytest.fixture(autouse=True)
def no_cache_left_on(request):
    yield
    if "pipe" in request.fixturenames:
        reset_cache(request.getfixturevalue("pipe"))


def render(pipe, steps: int = STEPS) -> np.ndarray:
    generator = torch.Generator("cpu").manual_seed(0)
    return pipe("a red circle", num_inference_steps=steps, generator=generator, output_type="np", **TINY_CALL_KWARGS).images


def enable(pipe, conf) -> dict:
    return apply_cache(pipe, conf, steps=STEPS, calibrate=lambda: render(pipe))


@pytest.mark.parametrize("name", METHODS)
def test_method_changes_the_image_and_reset_restores_it(pipe, baseline: np.ndarray, name: str) -> None:
    schema = CACHES[name][0]
    enable(pipe, schema())
    assert leftover_hooks(pipe.transformer, set(schema.HOOKS)) == sorted(schema.HOOKS), "hook names out of date"
    cached = render(pipe)
    assert np.isfinite(cached).all()
    assert np.abs(cached - baseline).mean() > 1e-4, f"{name} left the image unchanged"
    assert np.array_equal(cached, render(pipe)), "cache state leaked from one render into the next"
    reset_cache(pipe)
    assert leftover_hooks(pipe.transformer, set(schema.HOOKS)) == []
    assert np.array_equal(render(pipe), baseline)


@pytest.mark.parametrize("name", METHODS)
def test_applying_twice_without_reset_raises(pipe, name: str) -> None:
    conf = CACHES[name][0]()
    enable(pipe, conf)
    with pytest.raises(ValueError, match="reset_cache"):
        enable(pipe, conf)
    with pytest.raises(ValueError, match="reset_cache"):
        enable(pipe, NoCacheConf())


def test_none_and_reset_are_no_ops(pipe, baseline: np.ndarray) -> None:
    reset_cache(pipe)
    assert enable(pipe, NoCacheConf(threshold=0.5)) == {}
    assert not pipe.transformer.is_cache_enabled
    reset_cache(pipe)
    assert np.array_equal(render(pipe), baseline)


def test_magcache_calibrates_once_and_records_the_ratios(pipe) -> None:
    calls = []
    record = apply_cache(pipe, MagCacheConf(), steps=STEPS, calibrate=lambda: calls.append(render(pipe)))
    assert len(calls) == 1
    assert record["mag_ratios_source"] == "calibrated"
    assert len(record["mag_ratios"]) == STEPS and record["mag_ratios"][0] == 1.0
    assert all(isinstance(r, float) and r > 0 for r in record["mag_ratios"])
    calibrated = render(pipe)
    reset_cache(pipe)

    given = apply_cache(pipe, MagCacheConf(mag_ratios=record["mag_ratios"]), steps=STEPS, calibrate=pytest.fail)
    assert given == {**record, "mag_ratios_source": "given"}
    assert np.array_equal(render(pipe), calibrated)


def test_magcache_interpolates_given_ratios_to_the_step_count(pipe) -> None:
    record = apply_cache(pipe, MagCacheConf(mag_ratios=[1.0, 0.9, 1.1]), steps=STEPS)
    assert len(record["mag_ratios"]) == STEPS


def test_magcache_says_what_it_needs(pipe) -> None:
    with pytest.raises(ValueError, match="steps"):
        apply_cache(pipe, MagCacheConf(), calibrate=lambda: render(pipe))
    with pytest.raises(ValueError, match="calibrate"):
        apply_cache(pipe, MagCacheConf(), steps=STEPS)
    with pytest.raises(RuntimeError, match="num_inference_steps=8"):
        apply_cache(pipe, MagCacheConf(), steps=STEPS, calibrate=lambda: render(pipe, steps=4))
    assert not pipe.transformer.is_cache_enabled


def test_fastercache_is_guidance_distilled_on_flux(pipe) -> None:
    assert enable(pipe, FasterCacheConf()) == {"is_guidance_distilled": True}
    reset_cache(pipe)
    with pytest.raises(ValueError, match="is_guidance_distilled"):
        enable(pipe, FasterCacheConf(is_guidance_distilled=False))
    assert not pipe.transformer.is_cache_enabled


def test_config_node_and_dataclass_give_the_same_key() -> None:
    for name, (schema, _apply, _unbatchable) in CACHES.items():
        assert cache_key_params(OmegaConf.structured(schema)) == cache_key_params(schema()), name


def test_key_params_are_canonical() -> None:
    assert cache_key_params(NoCacheConf(threshold=0.1, mag_ratios=[1.0])) == {"name": "none"}
    assert cache_key_params(FBCacheConf(threshold=1)) == {"name": "fbcache", "threshold": 1.0}
    assert isinstance(cache_key_params(FBCacheConf(threshold=1))["threshold"], float)
    key = cache_key_params(PABConf(spatial_attention_timestep_skip_range=(0, 900)))
    assert key["spatial_attention_timestep_skip_range"] == [0, 900]


def test_none_accepts_every_parameter_of_every_method() -> None:
    none_fields = {f.name for f in dataclasses.fields(NoCacheConf)}
    for name, (schema, _apply, _unbatchable) in CACHES.items():
        assert {f.name for f in dataclasses.fields(schema)} <= none_fields, name
    node = OmegaConf.structured(NoCacheConf)
    OmegaConf.set_struct(node, True)
    node.threshold = 0.05
    node.spatial_attention_timestep_skip_range = [0, 900]
    with pytest.raises(ConfigAttributeError):
        node.thresold = 0.05


BAD_VALUES = [
    (FBCacheConf, {"threshold": -0.1}, "threshold=-0.1"),
    (FBCacheConf, {"threshold": "high"}, "threshold='high'"),
    (PABConf, {"spatial_attention_block_skip_range": None}, "at least one"),
    (PABConf, {"spatial_attention_timestep_skip_range": [800, 100]}, "lo < hi"),
    (PABConf, {"cross_attention_block_skip_range": 0}, "cross_attention_block_skip_range=0"),
    (TaylorSeerConf, {"taylor_factors_dtype": "int8"}, "bfloat16"),
    (TaylorSeerConf, {"cache_interval": 0}, "cache_interval=0"),
    (FasterCacheConf, {"tensor_format": "BSC"}, "BCHW"),
    (FasterCacheConf, {"unconditional_batch_timestep_skip_range": [5]}, "lo < hi"),
    (MagCacheConf, {"retention_ratio": 2.0}, "retention_ratio"),
    (MagCacheConf, {"mag_ratios": []}, "mag_ratios"),
]


@pytest.mark.parametrize("schema,values,match", BAD_VALUES)
def test_bad_values_name_the_key_and_the_valid_choices(schema, values: dict, match: str) -> None:
    with pytest.raises(CacheConfigError, match=match):
        schema(**values)
    # A config node with the same values (as a composed, untyped config would hold) fails the same way where
    # the cell key is made (the one place a cache config is validated).
    node = OmegaConf.create({**dataclasses.asdict(schema()), **values})
    with pytest.raises(ValueError, match=match):
        cache_key_params(node)


def test_an_unknown_method_lists_the_valid_ones() -> None:
    with pytest.raises(CacheConfigError, match="cache=turbo: no such cache method; valid: fastercache, fbcache, magcache, none, pab"):
        check_cache_supported("FluxPipeline", NoCacheConf(name="turbo"))


def test_every_public_module_is_a_registered_method() -> None:
    modules = {p.stem for p in Path(caches.__file__).parent.glob("*.py") if not p.stem.startswith("_")}
    assert modules == set(CACHES) - {"none"}
    for name, (schema, apply, _unbatchable) in CACHES.items():
        assert issubclass(schema, CacheSchema) and schema.name == name and callable(apply)
        assert name == "none" or schema.HOOKS, f"{name} declares no hook names"


@pytest.mark.parametrize("name", METHODS)
def test_support_check(name: str) -> None:
    conf = CACHES[name][0]()
    check_cache_supported("FluxPipeline", conf)
    check_cache_supported("StableDiffusionXLPipeline", NoCacheConf())
    with pytest.raises(ValueError, match=rf"cache {name}: StableDiffusionXLPipeline has no transformer.*cache=none"):
        check_cache_supported("StableDiffusionXLPipeline", conf)
    with pytest.raises(ValueError, match="no pipeline class NoSuchPipeline"):
        check_cache_supported("NoSuchPipeline", conf)


@pytest.mark.parametrize("name", list(CACHES))
def test_option_file_holds_no_second_copy_of_the_defaults(name: str) -> None:
    text = (CONF_DIR / f"{name}.yaml").read_text()
    assert text.startswith("# ")
    assert yaml.safe_load(text) == {"defaults": [f"/schema/cache/{name}@_here_", "_self_"]}


def test_importing_the_registry_imports_no_torch() -> None:
    code = "import sys, render.axes.caches; sys.exit(bool({'torch', 'diffusers'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], cwd=Path(caches.__file__).parents[1])
    assert result.returncode == 0


def test_the_cache_record_reaches_run_json(tiny_cache: Path, tmp_path: Path) -> None:
    """MagCache's calibrated ratios are recorded in the run directory, as its docs say."""
    from render.cell import build_job
    from render.run.loader import PIPELINES
    from render.rundir import SampleStore
    from render.run.runner import run_job
    from tests.conftest import compose_cfg

    overrides = ["model=tiny", "device=cpu", "prompts.limit=1", f"steps={STEPS}", "render_anchor=false", "cache=magcache"]
    job = build_job(compose_cfg(*overrides, out_root=tmp_path))
    (result,) = run_job(job, tmp_path / "run", store=SampleStore(tmp_path), pipelines=PIPELINES, overrides=overrides)
    assert result.status == "done", result.message
    record = json.loads((tmp_path / "run" / "run.json").read_text())["cache_record"]
    assert record["mag_ratios_source"] == "calibrated" and len(record["mag_ratios"]) == STEPS


def test_textkv_reuses_the_text_projections_exactly_where_diffusers_supports_it() -> None:
    """No family here takes the text KV cache (diffusers hooks NucleusMoE-Image's blocks only): its module still
    runs on a tiny NucleusMoEImageTransformer2DModel, leaves the output exact and projects the text once."""
    from types import SimpleNamespace

    from diffusers import NucleusMoEImageTransformer2DModel

    from render.axes.caches.textkv import TextKVConf

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        transformer = NucleusMoEImageTransformer2DModel(
            patch_size=2, in_channels=16, num_layers=2, attention_head_dim=8, num_attention_heads=2, joint_attention_dim=16,
            axes_dims_rope=(2, 2, 4), moe_enabled=False).eval()
        latents, text = torch.randn(1, 16, 16), torch.randn(1, 5, 16)
    projections = []
    for block in transformer.transformer_blocks:
        block.encoder_proj.register_forward_hook(lambda *_: projections.append(1))

    def denoise() -> torch.Tensor:  # one step of a denoising loop: the prompt's embeddings are the same tensor each time
        with torch.no_grad():
            return transformer(hidden_states=latents, img_shapes=[(1, 4, 4)], encoder_hidden_states=text,
                               encoder_hidden_states_mask=torch.ones(1, 5, dtype=torch.bool), timestep=torch.tensor([0.5]),
                               return_dict=False)[0]

    baseline = denoise()
    pipe = SimpleNamespace(transformer=transformer)
    projections.clear()
    assert apply_cache(pipe, TextKVConf()) == {}
    assert leftover_hooks(transformer, set(TextKVConf.HOOKS)) == sorted(TextKVConf.HOOKS)
    assert torch.equal(denoise(), baseline) and torch.equal(denoise(), baseline)  # exact
    assert len(projections) == 2  # once per block, not once per block per step
    reset_cache(pipe)
    assert leftover_hooks(transformer, set(TextKVConf.HOOKS)) == []


def test_a_cache_diffusers_cannot_engage_is_refused_on_the_loaded_transformer(pipe) -> None:
    """Preflight reads the classes; apply checks the loaded transformer too (a pipeline preflight could not read)."""
    from types import SimpleNamespace

    with pytest.raises(CacheConfigError, match="textkv: FluxPipeline's FluxTransformer2DModel: diffusers' text KV cache hooks only"):
        apply_cache(pipe, {"name": "textkv"})
    with pytest.raises(CacheConfigError, match="seacache: FluxPipeline does not pass num_inference_steps, sigma, step_index"):
        apply_cache(pipe, {"name": "seacache"}, steps=STEPS)
    unreadable = SimpleNamespace(transformer=pipe.transformer)  # no pipeline source to read: the transformer decides
    with pytest.raises(CacheConfigError, match="seacache: diffusers has no raw-vision adapter for this FluxTransformer2DModel"):
        apply_cache(unreadable, {"name": "seacache"}, steps=STEPS)
    assert not pipe.transformer.is_cache_enabled
