"""A pipeline class is resolved and inspected one way, for loading and for preflight alike: a diffusers
class name or the dotted path of one's own. Preflight once refused the dotted ones loading takes."""

from __future__ import annotations

import pytest

from render.compose.introspect import UNKNOWN, PipelineUnavailable, pipeline_class, pipeline_info
from render.models.shapes import shapes_model_dir
from render.run.preflight import PreflightError, preflight_config
from tests.conftest import compose_cfg


def test_preflight_takes_a_dotted_pipeline_in_a_local_folder(tmp_path) -> None:
    job = preflight_config(compose_cfg("model=shapes", f"model.id={shapes_model_dir()}", "device=cpu", "cache=fbcache",
                                       out_root=tmp_path))
    assert job.cell.model.pipeline == "render.models.shapes.ShapesPipeline"


@pytest.mark.parametrize("pipeline,message", [("render.models.shapes.NoSuchPipeline", "cannot import render.models.shapes.NoSuchPipeline"),
                                              ("NoSuchPipeline", "has no pipeline class NoSuchPipeline")])
def test_a_pipeline_that_cannot_be_imported_is_named(pipeline: str, message: str, tmp_path) -> None:
    with pytest.raises(PreflightError, match=message):
        preflight_config(compose_cfg("model=shapes", f"model.id={shapes_model_dir()}", f"model.pipeline={pipeline}",
                                     "device=cpu", out_root=tmp_path))


def test_one_inspection_for_every_check() -> None:
    flux = pipeline_info("FluxPipeline")
    assert flux.cls is pipeline_class("FluxPipeline") and "vae" in flux.components
    assert flux.transformer is not None and flux.transformer is not UNKNOWN and flux.denoiser is flux.transformer
    sdxl = pipeline_info("StableDiffusionXLPipeline")
    assert sdxl.transformer is None and sdxl.denoiser is not None  # a UNet: no cache hooks, still compilable
    shapes = pipeline_info("render.models.shapes.ShapesPipeline")
    assert "vae" not in shapes.components
    with pytest.raises(PipelineUnavailable):
        pipeline_info("not.a.module.Pipeline")


def test_an_optional_component_is_its_class() -> None:
    """WanPipeline declares `transformer: WanTransformer3DModel | None`; preflight once saw no class there and left
    the cache and compile checks to the loaded pipeline."""
    from diffusers import WanTransformer3DModel

    wan = pipeline_info("WanPipeline")
    assert wan.transformer is WanTransformer3DModel and wan.denoiser is WanTransformer3DModel
