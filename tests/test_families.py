"""Model families (render/models/families/): every family's tiny twin renders its default cell through
`python -m render` and scores with `assess score`; every scheduler, cache and CPU attention backend the
family takes renders on its twin; a scheduler, cache or pipeline it does not take is refused by preflight."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from assess.cli import cli as assess_cli
from render.app import PIPELINES
from render.axes.attention import BACKENDS as ATTENTION
from render.axes.caches import caches_taken
from render.cell import build_job
from render.run.apng import read_frames
from render.models.families import families, family, twins
from render.run.preflight import PreflightError, preflight_config
from render.rundir import SampleStore
from render.run.runner import run_job
from tests.conftest import compose_cfg, run_render

CONF_MODELS = Path(__file__).resolve().parents[1] / "render" / "conf" / "model"
NEW_TWINS = {"tiny-flux2": "flux2", "tiny-qwen-image": "qwen-image", "tiny-z-image": "z-image", "tiny-wan": "wan"}  # model -> family
CPU_BACKENDS = [name for name, spec in ATTENTION.items() if not spec.needs_cuda]


def caches(family_name: str) -> list[str]:
    """The cache options preflight lets through for the family's pipeline."""
    return caches_taken(family(family_name).pipelines[0], family_name)


def render_sample(tmp_path: Path, model: str, *overrides: str, prompt: int = 1) -> tuple[np.ndarray, dict]:
    """The `prompt`-th smoke prompt's image and sample record of one cell (3 steps unless overridden), rendered
    in-process through the runner."""
    cfg = compose_cfg(f"model={model}", "device=cpu", f"prompts.limit={prompt}", "steps=3", "render_anchor=false",
                      *overrides, out_root=tmp_path)
    run_dir = tmp_path / "run"
    (result,) = run_job(build_job(cfg), run_dir, store=SampleStore(tmp_path), pipelines=PIPELINES, overrides=list(overrides))
    assert result.status == "done", result.message
    record = json.loads((run_dir / "samples.jsonl").read_text().splitlines()[prompt - 1])
    return np.asarray(Image.open(run_dir / record["image"]), dtype=np.float32), record


def render_one(tmp_path: Path, model: str, *overrides: str) -> np.ndarray:
    return render_sample(tmp_path, model, *overrides)[0]


@pytest.mark.slow
def test_every_family_is_a_module_and_every_model_yaml_names_one() -> None:
    assert {"flux", "sd3", "sdxl", "flux2", "qwen-image", "z-image", "wan"} <= set(families())
    assert {f.name: f.twin.name for f in families().values() if f.twin} == {"flux": "tiny", **{v: k for k, v in NEW_TWINS.items()}}
    for path in sorted(CONF_MODELS.glob("*.yaml")):
        m = compose_cfg(f"model={path.stem}").model
        known = family(m.family)  # raises for a family no module declares
        assert "." in m.pipeline or m.pipeline in known.pipelines, (path.name, m.pipeline, known.pipelines)
        assert known.schedulers, path.name
    for name in twins():
        assert compose_cfg(f"model={name}").model.id == f"hypergrid:{name}"


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(NEW_TWINS))
def test_twin_renders_its_default_cell_through_the_cli_and_scores(model: str, twin_cache: Path, tmp_path: Path) -> None:
    result = run_render(f"model={model}", "prompts.limit=2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = {json.loads(p.read_text())["cell"]["steps"]: p.parent for p in (tmp_path / "outputs").rglob("run.json")}
    assert set(runs) == {8, 16}  # the twin's default cell and its anchor
    meta = json.loads((runs[8] / "run.json").read_text())
    assert meta["cell"]["model"]["family"] == NEW_TWINS[model] and meta["cell"]["model"]["id"] == f"hypergrid:{model}"
    images = [np.asarray(Image.open(runs[8] / json.loads(line)["image"]), dtype=np.float32)
              for line in (runs[8] / "samples.jsonl").read_text().splitlines()]
    assert len(images) == 2 and all(np.isfinite(i).all() and i.shape == (32, 32, 3) and i.std() > 1 for i in images)
    assert np.abs(images[0] - images[1]).mean() > 0.01  # the prompt reaches the image through the text encoder

    db = tmp_path / "index.db"
    scored = CliRunner().invoke(assess_cli, ["score", str(tmp_path / "outputs"), "--db", str(db), "--metrics", "psnr", "-q"],
                                catch_exceptions=False)
    assert scored.exit_code == 0, scored.output
    assert "scored 2 run(s), 4 sample(s)" in scored.output and "0 score(s) written" not in scored.output


@pytest.mark.slow
@pytest.mark.parametrize("model,scheduler", [(m, s) for m, f in sorted(NEW_TWINS.items()) for s in family(f).schedulers])
def test_every_scheduler_of_the_family_renders_on_its_twin(model: str, scheduler: str, twin_cache: Path, tmp_path: Path) -> None:
    image = render_one(tmp_path, model, f"scheduler={scheduler}")
    default = render_one(tmp_path / "default", model, "scheduler=default")
    assert np.isfinite(image).all() and image.std() > 1
    own = json.loads((twins()[model].folder() / "scheduler" / "scheduler_config.json").read_text())["_class_name"]
    spec = family(NEW_TWINS[model]).schedulers[scheduler]
    if spec.cls == own and not spec.kwargs:  # the twin's own scheduler, rebuilt from its config: the same image
        assert np.array_equal(image, default)


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(NEW_TWINS))
def test_the_guidance_knob_reaches_each_twins_pipeline(model: str, twin_cache: Path, tmp_path: Path) -> None:
    """guidance_scale for FLUX.2 (its guidance embedding) and Z-Image (CFG), true_cfg_scale for Qwen-Image."""
    low = render_one(tmp_path / "low", model, "guidance=1.0")
    high = render_one(tmp_path / "high", model, "guidance=6.0")
    assert np.abs(low - high).mean() > 0.01


@pytest.mark.slow
@pytest.mark.parametrize("model,backend", [(m, b) for m in sorted(NEW_TWINS) for b in CPU_BACKENDS])
def test_every_cpu_attention_backend_renders_on_the_twins(model: str, backend: str, twin_cache: Path, tmp_path: Path) -> None:
    image = render_one(tmp_path, model, f"attention={backend}")
    native = render_one(tmp_path / "native", model, "attention=native")
    assert np.isfinite(image).all() and np.abs(image - native).mean() < 1.0  # the same math up to rounding


@pytest.mark.slow
@pytest.mark.parametrize("model,cache", [(m, c) for m, f in sorted(NEW_TWINS.items()) for c in caches(f) if c != "none"])
def test_every_cache_the_family_takes_renders_on_its_twin(model: str, cache: str, twin_cache: Path, tmp_path: Path) -> None:
    image, record = render_sample(tmp_path, model, f"cache={cache}", "steps=8")  # the twin's default steps: the cache engages
    assert np.isfinite(image).all() and image.std() > 1
    assert record["blocks_reused"] > 0 and record["steps_reused"] > 0, record


def test_a_clip_family_writes_each_sample_as_an_animated_png(twin_cache: Path, tmp_path: Path) -> None:
    image, record = render_sample(tmp_path, "tiny-wan")
    assert (record["frames"], record["fps"]) == (9, 16)  # the twin's model config
    assert record["s_per_frame"] == pytest.approx(record["latency_s"] / 9, abs=1e-5)
    with Image.open(tmp_path / "run" / record["image"]) as clip:
        assert clip.format == "PNG" and clip.is_animated and clip.size == (32, 32)
    frames = read_frames(tmp_path / "run" / record["image"], record["frames"], record["fps"])
    assert frames.shape == (9, 32, 32, 3) and np.array_equal(frames[0], image.astype(np.uint8))
    assert np.abs(frames[4].astype(np.float32) - image).mean() > 0.01  # the frames differ: a clip, not a still


def test_the_families_take_what_diffusers_hooks() -> None:
    assert caches("flux2") == ["none", "fastercache", "magcache", "pab"]  # no cache_context in Flux2Pipeline
    assert caches("qwen-image") == ["none", "fbcache", "magcache", "taylorseer"]
    assert caches("z-image") == ["none"]  # ZImageTransformer2DModel is no CacheMixin
    assert caches("wan") == ["none", "fbcache", "magcache", "pab", "seacache"]  # WanPipeline tells SeaCache its sigmas


BAD_PAIRINGS = [
    (["model=tiny-flux2", "cache=fbcache"], "cache fbcache: the flux2 model family does not take it (Flux2Pipeline calls its "
                                            "transformer outside a cache_context, which its hooks need); valid: none, "
                                            "fastercache, magcache, pab"),
    (["model=tiny-z-image", "cache=fbcache"], "cache fbcache: ZImagePipeline's ZImageTransformer2DModel takes no diffusers "
                                              "cache hooks; use cache=none"),
    (["model=tiny", "cache=seacache"], "cache seacache: FluxPipeline does not pass num_inference_steps, sigma, step_index to "
                                       "its transformer's cache_context, which SeaCache's gate reads (diffusers 0.42: "
                                       "WanPipeline, Cosmos3OmniPipeline); valid: none, fastercache, fbcache, magcache, pab, "
                                       "taylorseer"),
    (["model=tiny-wan", "cache=textkv"], "cache textkv: WanPipeline's WanTransformer3DModel: diffusers' text KV cache hooks "
                                         "only NucleusMoEImageTransformerBlock (NucleusMoEImagePipeline); it would hook "
                                         "nothing here; valid: none, fbcache, magcache, pab, seacache"),
    (["model=tiny-z-image", "scheduler=dpmpp-2m"], "scheduler=dpmpp-2m is not available for the z-image model family; "
                                                   "valid: default, euler, euler-karras"),
    (["model=tiny-qwen-image", "scheduler=deis"], "scheduler=deis is not available for the qwen-image model family; "
                                                  "valid: default, euler, euler-karras, unipc"),
    (["model=tiny-flux2", "scheduler=heun"], "scheduler=heun is not available for the flux2 model family; "
                                             "valid: default, euler, euler-karras, dpmpp-2m, unipc, deis"),
    (["model=tiny-flux2", "model.pipeline=FluxPipeline"], "model.pipeline=FluxPipeline is a pipeline of the flux model "
                                                          "family, not flux2; valid: Flux2Pipeline (or model.family=flux)"),
    (["model=tiny", "model.family=flux3"], "model.family=flux3: no such model family; valid: flux, flux2, qwen-image, sd3, "
                                           "sdxl, wan, z-image"),
    (["model=tiny", "model.num_frames=9"], "model.num_frames=9: model tiny (flux family) renders images, not clips; only a "
                                            "clip family (wan) takes it"),
    (["model=tiny-wan", "model.num_frames=10"], "model.num_frames=10: the wan family renders k*4+1 frames (1, 5, 9, ...); "
                                                "use 9, 13"),
    (["model=tiny-wan", "model.fps=0"], "model.fps=0: model tiny-wan renders clips; give a positive fps"),
]


@pytest.mark.parametrize("case", range(len(BAD_PAIRINGS)), ids=[" ".join(a) for a, _ in BAD_PAIRINGS])
def test_a_pairing_the_family_does_not_take_is_refused_by_preflight(case: int, tmp_path: Path) -> None:
    overrides, message = BAD_PAIRINGS[case]
    with pytest.raises(PreflightError) as refused:
        preflight_config(compose_cfg(*overrides, "device=cpu", out_root=tmp_path / "outputs"), single=True)
    assert message in str(refused.value)
    assert not (tmp_path / "outputs").exists()


def test_a_bad_pairing_exits_2_through_the_cli_before_anything_is_written(tmp_path: Path) -> None:
    result = run_render("model=tiny-z-image", "scheduler=unipc", cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "scheduler=unipc is not available for the z-image model family; valid: default, euler, euler-karras" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "outputs").exists()


def _doc_row(family_name: str) -> str:
    """The family's row of docs/models.md's table, from the code."""
    from render.compose.introspect import UNKNOWN, pipeline_info

    known = family(family_name)
    info = pipeline_info(known.pipelines[0])
    if info.transformer is UNKNOWN:  # a pipeline whose transformer is typed as a union: checked on the loaded one
        blocks = ["(checked at load)"]
    else:
        blocks = (getattr(info.transformer, "_repeated_blocks", None) or []) if info.transformer else []
    models = [p.stem for p in sorted(CONF_MODELS.glob("*.yaml")) if compose_cfg(f"model={p.stem}").model.family == family_name]
    cells = [f"`{known.name}`", ", ".join(known.pipelines), ", ".join(["default", *known.schedulers]),
             ", ".join(caches(family_name)), ", ".join(blocks) or "— (`compile=full`)", ", ".join(f"`{m}`" for m in models)]
    return "| " + " | ".join(cells) + " |"


@pytest.mark.slow
@pytest.mark.parametrize("family_name", sorted(families()))
def test_docs_models_table_says_what_each_family_takes(family_name: str) -> None:
    text = (CONF_MODELS.parents[2] / "docs" / "models.md").read_text()
    assert _doc_row(family_name) in text


@pytest.mark.slow  # a subprocess render (~15 s); the in-process render of every cache on its twin is in the default suite
def test_seacache_skips_work_on_the_wan_twin_through_the_cli(twin_cache: Path, tmp_path: Path) -> None:
    """SeaCache (diffusers' SeaCacheConfig) through `python -m render`: its engagement is in each sample's record."""
    result = run_render("model=tiny-wan", "cache=seacache", "prompts.limit=1", "render_anchor=false", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    (samples,) = (tmp_path / "outputs").rglob("samples.jsonl")
    record = json.loads(samples.read_text().splitlines()[0])
    assert record["steps_reused"] > 0 and record["blocks_reused"] > 0 and record["steps_computed"] > 0, record
    assert json.loads((samples.parent / "run.json").read_text())["cell"]["cache"]["name"] == "seacache"


@pytest.mark.slow
def test_a_cache_the_family_does_not_take_exits_2_naming_those_it_does(tmp_path: Path) -> None:
    result = run_render("model=tiny-flux2", "cache=seacache", cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "cache seacache: Flux2Pipeline does not pass" in result.stderr
    assert "valid: none, fastercache, magcache, pab" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "outputs").exists()
