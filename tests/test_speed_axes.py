"""The speed axes (render/axes/): every option renders on the CPU or is refused by preflight with its
reason; each value enters the cell key; load-time choices key the pipeline cache; per-cell choices
are undone, so a cell's image is the same alone and after other cells; compile time is recorded apart.

Fast tests compile with `compile.backend=eager` (dynamo captures and guards, no kernel generation);
the inductor ones are marked slow."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from render import axes
from render.run.loader import PipelineCache
from render.run.preflight import PreflightError, preflight_config
from render.rundir import SampleStore
from render.run.runner import run_job
from tests.conftest import compose_cfg, run_render

SHAPES = ("device=cpu", "model=shapes", "prompts.limit=1", "steps=4", "render_anchor=false")

RENDERS = {  # model=shapes unless a model is given
    "compile-regional": ["compile=regional", "compile.backend=eager"],
    "compile-full": ["compile=full", "compile.backend=eager"],
    "int8wo": ["quant=int8wo"],
    "int8dq": ["quant=int8dq"],
    "fp8wo": ["quant=fp8wo"],
    "quanto-int8": ["quant=quanto-int8"],
    "group-block": ["offload=group"],
    "group-leaf": ["offload=group", "offload.offload_type=leaf_level"],
    "layerwise": ["offload=layerwise"],
    "fuse_qkv": ["fuse_qkv=true"],
    "tiny-vae_tiling": ["model=tiny", "vae_tiling=true"],
    "tiny-vae_slicing": ["model=tiny", "vae_slicing=true"],
    "tiny-channels_last": ["model=tiny", "channels_last=true"],
}

REFUSED = {
    "fp8dq": (["quant=fp8dq"], r"quant=fp8dq \(torchao\) needs a CUDA GPU"),
    "nf4": (["quant=nf4"], r"quant=nf4 \(bitsandbytes\) needs a CUDA GPU"),
    "model-offload": (["offload=model"], r"offload=model .* this cell runs on the CPU"),
    "stream": (["offload=group", "offload.use_stream=true"], r"use_stream=true needs CUDA streams"),
    "shapes-vae_tiling": (["vae_tiling=true"], r"vae_tiling=true: .*ShapesPipeline has no VAE"),
    "shapes-vae_slicing": (["vae_slicing=true"], r"vae_slicing=true: .*has no VAE"),
    "shapes-channels_last": (["channels_last=true"], r"channels_last=true: .*has no VAE or UNet"),
    "fullgraph-cache": (["compile=regional", "compile.fullgraph=true", "cache=fbcache"],
                        r"compile.fullgraph=true with cache=fbcache: its hooks break the graph"),
    "fullgraph-offload": (["compile=full", "compile.fullgraph=true", "offload=group"], r"fullgraph=true with offload=group"),
    "reduce-overhead": (["compile=full", "compile.mode=reduce-overhead"], r"reduce-overhead captures CUDA graphs"),
    "layerwise-quant": (["offload=layerwise", "quant=int8wo"], r"offload=layerwise with quant=int8wo"),
    "fuse-quant": (["fuse_qkv=true", "quant=int8wo"], r"fuse_qkv=true with quant=int8wo"),
    "bad-mode": (["compile=regional", "compile.mode=fast"], r"compile.mode=fast: valid values are default, "),
    "bad-component": (["quant=int8wo", "quant.components=[unet]"], r"unet is not a component of this pipeline"),
    "no-component": (["quant=int8wo", "quant.components=[]"], r"name at least one component"),
    "bad-blocks": (["offload=group", "offload.num_blocks_per_group=0"], r"num_blocks_per_group=0: must be >= 1"),
    "bad-warmup": (["warmup=-1"], r"warmup=-1: must be >= 0"),
}


def render(tmp_path: Path, pipelines: PipelineCache, *overrides: str, out: str | None = None) -> tuple[bytes, dict, dict]:
    """Render one shapes sample; (PNG bytes, its sample record, run.json)."""
    job = preflight_config(compose_cfg(*SHAPES, *overrides, out_root=tmp_path))
    run_dir = tmp_path / (out or job.cell.key)
    (result,) = run_job(job, run_dir, store=SampleStore(tmp_path), pipelines=pipelines, overrides=list(overrides))
    assert result.status == "done", result.message
    record = json.loads((run_dir / "samples.jsonl").read_text().splitlines()[0])
    return (run_dir / record["image"]).read_bytes(), record, json.loads((run_dir / "run.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("name", RENDERS)
def test_every_cpu_option_renders(name: str, tiny_cache: Path, tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    png, record, run = render(tmp_path, PipelineCache(), *RENDERS[name])
    pixels = np.asarray(Image.open(tmp_path / run["cell_key"] / record["image"]), dtype=np.float32)
    assert np.isfinite(pixels).all() and pixels.std() > 1
    assert record["weights_bytes"] > 0 and record["compile_s"] >= 0
    if name.startswith("compile"):
        assert record["compiled_frames"] > 0 and record["compile_s"] > 0  # the first call compiled


@pytest.mark.parametrize("name", REFUSED)
def test_what_cannot_run_is_refused_with_its_reason(name: str) -> None:
    overrides, reason = REFUSED[name]
    with pytest.raises(PreflightError, match=reason):
        preflight_config(compose_cfg(*SHAPES, *overrides))


@pytest.mark.parametrize("option,extra", [("int8wo", "quant"), ("quanto-int8", "quant"), ("fp8wo", "quant")])
def test_missing_backend_package_names_the_extra(option: str, extra: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name.split(".")[0] in ("torchao", "optimum") else real(name, *a))
    with pytest.raises(PreflightError, match=rf"quant={option} needs the package .*pip install 'hypergrid\[{extra}\]'"):
        preflight_config(compose_cfg(*SHAPES, f"quant={option}"))


@pytest.mark.slow
def test_refusal_exits_2_before_anything_is_written(tmp_path: Path) -> None:
    result = run_render("model=shapes", "device=cpu", "quant=nf4", f"out_root={tmp_path / 'out'}", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "quant=nf4 (bitsandbytes) needs a CUDA GPU" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_every_value_enters_the_cell_key_and_the_anchor_takes_none() -> None:
    variants = [[], *RENDERS.values(), ["compile=regional", "compile.mode=max-autotune-no-cudagraphs"],
                ["compile=regional", "compile.dynamic=true"], ["quant=int8wo", "quant.components=[transformer,text_encoder]"],
                ["offload=group", "offload.num_blocks_per_group=2"], ["offload=layerwise", "offload.storage_dtype=float8_e5m2"]]
    jobs = [preflight_config(compose_cfg(*SHAPES, *v)) for v in variants if "model=tiny" not in v]
    keys = [j.cell.key for j in jobs]
    assert len(set(keys)) == len(keys)
    assert len({j.anchor.key for j in jobs}) == 1
    anchor = jobs[1].anchor
    assert (anchor.axes["compile"], anchor.axes["quant"], anchor.axes["offload"]) == ({"name": "none"},) * 3
    assert not anchor.axes["fuse_qkv"]


def test_unused_parameters_do_not_split_cells() -> None:
    plain = preflight_config(compose_cfg(*SHAPES)).cell.key
    assert preflight_config(compose_cfg(*SHAPES, "compile.mode=max-autotune")).cell.key == plain  # compile=none
    assert preflight_config(compose_cfg(*SHAPES, "quant.components=[text_encoder]")).cell.key == plain  # quant=none
    group = preflight_config(compose_cfg(*SHAPES, "offload=layerwise", "offload.num_blocks_per_group=4")).cell.key
    assert group == preflight_config(compose_cfg(*SHAPES, "offload=layerwise")).cell.key  # a group-offload field


ALONE_FAST = [["quant=int8wo"], ["compile=regional", "compile.backend=eager", "fuse_qkv=true"], []]
ALONE_ALL = [["quant=int8wo"], ["compile=regional", "compile.backend=eager"], ["fuse_qkv=true"], ["offload=group"],
             ["offload=layerwise"], ["compile=full", "compile.backend=eager", "cache=fbcache"], []]


FAST_WHY = "six real renders in one process: the default tier's one check that per-cell axes are undone"


@pytest.mark.parametrize("cells", [pytest.param(ALONE_FAST, marks=pytest.mark.long(FAST_WHY)),
                                   pytest.param(ALONE_ALL, marks=pytest.mark.slow)], ids=["fast", "all"])
def test_alone_and_after_other_cells_give_the_same_bytes(cells: list[list[str]], tmp_path: Path) -> None:
    """Per-cell axes are undone (compile, offload hooks, fused projections) and load-time ones reload:
    each cell's image is byte-identical rendered alone and after the others in one process."""
    shared = PipelineCache()
    after = [render(tmp_path / "sweep", shared, *c)[0] for c in cells]
    for i, (cell, image) in enumerate(zip(cells, after)):
        alone, _, _ = render(tmp_path / f"alone-{i}", PipelineCache(), *cell)
        assert alone == image, f"{cell}: differs after the other cells"


@pytest.mark.slow
def test_quantized_weights_do_not_leak_into_the_next_cell(tmp_path: Path) -> None:
    import torch

    shared = PipelineCache()
    _, quantized, _ = render(tmp_path / "a", shared, "quant=int8wo")
    plain_after, plain, _ = render(tmp_path / "a", shared)
    loaded = shared.get(preflight_config(compose_cfg(*SHAPES)).cell.model, "cpu")
    assert all(type(p) is torch.nn.Parameter for p in loaded.pipe.transformer.parameters())  # plain weights
    plain_alone, _, _ = render(tmp_path / "b", PipelineCache())
    assert plain_after == plain_alone
    assert quantized["weights_bytes"] < 0.5 * plain["weights_bytes"]
    requant, again, _ = render(tmp_path / "c", shared, "quant=int8wo")  # and back: a fresh quantized load
    assert again["weights_bytes"] == quantized["weights_bytes"]


@pytest.mark.slow
def test_a_quantized_pipeline_is_freed_when_the_next_one_loads() -> None:
    """torchao's quantized modules hold themselves in a cycle: without the collector, the cache's old quantized
    pipeline stayed alive beside the next load (on a GPU: in its memory, counted in the next cell's peak)."""
    import gc
    import weakref

    import torch

    shared = PipelineCache()
    quantized = preflight_config(compose_cfg(*SHAPES, "quant=int8wo")).cell
    transformer = shared.get(quantized.model, "cpu", axes.load_options(quantized)).pipe.transformer
    old = weakref.ref(next(m for m in transformer.modules() if isinstance(m, torch.nn.Linear)))  # a quantized layer
    del transformer
    assert old() is not None
    gc.disable()  # the collector's own schedule is not the cache's: on a GPU few Python objects are made to wake it
    try:
        shared.clear()  # what get() of another model does before it loads that one
        assert old() is None, "a quantized layer outlived its pipeline's place in the cache"
    finally:
        gc.enable()


@pytest.mark.slow
@pytest.mark.parametrize("quant", ["int8wo", "fp8wo"])
def test_quantizing_leaves_how_the_process_compiles_alone(quant: str) -> None:
    """torchao's configs turn on inductor's coordinate-descent tuning for the whole process by default: a cell
    compiled after a quantized one (in a sweep, a side-by-side round) would have compiled, and timed, differently."""
    import torch
    from torch._inductor import config as inductor

    from render.axes.quant import quantize_in_place

    with inductor.patch(coordinate_descent_tuning=False, coordinate_descent_check_all_directions=False):
        quantize_in_place(torch.nn.Sequential(torch.nn.Linear(64, 64)), quant)
        assert not inductor.coordinate_descent_tuning and not inductor.coordinate_descent_check_all_directions


@pytest.mark.slow
def test_warmup_count_defaults_to_what_the_cell_needs(tmp_path: Path) -> None:
    from render.axes import default_warmups

    cell = lambda *o: preflight_config(compose_cfg(*SHAPES, *o)).cell  # noqa: E731
    assert default_warmups(cell()) == 1 and default_warmups(cell("cache=fbcache")) == 1
    assert default_warmups(cell("compile=regional")) == 2 and default_warmups(cell("compile=full", "cache=fbcache")) == 3
    shared = PipelineCache()

    def warmups(*overrides: str) -> list[bool]:
        job = preflight_config(compose_cfg(*SHAPES, "prompts.limit=3", "steps=2", *overrides, out_root=tmp_path))
        (result,) = run_job(job, tmp_path / job.cell.key, store=SampleStore(tmp_path), pipelines=shared, overrides=[])
        return [json.loads(line)["warmup"] for line in (result.run_dir / "samples.jsonl").read_text().splitlines()]

    assert warmups("compile=regional", "compile.backend=eager") == [True, True, False]
    assert warmups("warmup=0") == [False] * 3


@pytest.mark.slow
def test_sweep_compile_by_quant_four_cells_one_anchor(tiny_cache: Path, tmp_path: Path) -> None:
    """`-m compile=none,regional quant=none,int8wo`: four cells with distinct keys, compile time recorded
    apart from latency, and fidelity scored against the one anchor."""
    from assess.cli import cli

    out = tmp_path / "out"
    result = run_render("-m", "model=shapes", "device=cpu", "prompts.limit=2", "steps=4", "compile.backend=eager",
                        "compile=none,regional", "quant=none,int8wo", f"out_root={out}", cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    run_dirs = [p.parent for p in (out / "multirun").rglob("run.json")]
    runs = [json.loads((d / "run.json").read_text()) for d in run_dirs]
    assert len(runs) == 4 and len({r["cell_key"] for r in runs}) == 4 and len({r["anchor"]["cell_key"] for r in runs}) == 1
    for run_dir, run in zip(run_dirs, runs):
        first, *rest = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
        if run["cell"]["compile"]["name"] == "regional":  # the first call compiled: its compile time is on its record
            assert first["compile_s"] > 0 and first["compiled_frames"] > 0 and first["warmup"]
        else:
            assert first["compile_s"] == 0 and first["compiled_frames"] == 0
        assert all(r["recompiles"] == 0 for r in rest)
    weights = {(r["cell"]["quant"]["name"]): json.loads((d / "samples.jsonl").read_text().splitlines()[0])["weights_bytes"]
               for d, r in zip(run_dirs, runs)}
    assert weights["int8wo"] < 0.5 * weights["none"]
    invoked = CliRunner().invoke(cli, ["score", str(out), "--db", str(out / "index.db")], catch_exceptions=False)
    assert invoked.exit_code == 0, invoked.output
    with sqlite3.connect(out / "index.db") as db:
        rows = db.execute("SELECT cell_key, reference_cell_key, value FROM scores WHERE metric = 'psnr'").fetchall()
    anchor = runs[0]["anchor"]["cell_key"]
    scored = {k for k, ref, value in rows if ref == anchor and k != anchor}
    assert scored == {r["cell_key"] for r in runs}


@pytest.mark.slow
def test_inductor_compile_is_close_to_eager_and_records_compile_time(tmp_path: Path) -> None:
    """Inductor may reorder floating-point work: the compiled image is within the stated tolerance of the
    eager one (one PNG level; measured on this CPU: identical bytes), and the first call's compile time
    is recorded apart."""
    import io

    import numpy as np
    from PIL import Image

    shared = PipelineCache()
    eager, _, _ = render(tmp_path, shared)
    compiled, record, _ = render(tmp_path, shared, "compile=regional")
    again, _, _ = render(tmp_path, shared)
    assert again == eager  # undone: eager again, bit for bit
    a, b = (np.asarray(Image.open(io.BytesIO(x)), dtype=np.int16) for x in (eager, compiled))
    assert np.abs(a - b).max() <= 1
    assert record["compile_s"] > 1 and record["compiled_frames"] > 0


@pytest.mark.slow
def test_experiments_take_the_speed_axes() -> None:
    """An experiment can put the new groups and toggles in its axes; the anchor supplies their start
    (none / false) and a rendered cell's coordinates are read back from its run.json cell."""
    from assess.experiment import load_experiment

    exp = load_experiment("demo", ["+experiment.axes.compile=[none,regional]", "+experiment.axes.quant=[none,int8wo]",
                                   "+experiment.axes.fuse_qkv=[false,true]"])
    assert exp.cell_overrides(exp.start)[-3:] == ["compile=none", "quant=none", "fuse_qkv=false"]
    cell = preflight_config(compose_cfg("device=cpu", "steps=8", *exp.cell_overrides(exp.start)[1:3],
                                        "compile=regional", "quant=int8wo", "fuse_qkv=false")).cell
    assert exp.coords_of_cell(cell.canonical())[-3:] == ("regional", "int8wo", "false")


def test_compiled_artefacts_go_to_the_project_cache_unless_the_user_chose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inductor writes its default folder into TORCHINDUCTOR_CACHE_DIR as soon as anything asks for it
    (importing torchao does): that default must not keep the artefacts out of the project's cache."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    from render.axes.compile import use_artefact_cache

    monkeypatch.setenv("HYPERGRID_CACHE", str(tmp_path))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    cache_dir()  # what an import of torchao does: inductor sets its default
    use_artefact_cache()
    assert cache_dir() == str(tmp_path / "torch-compile")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    use_artefact_cache()
    assert cache_dir() == str(tmp_path / "mine")
