"""The winner in production (docs/production.md, issue 62): `hypergrid.apply` applies a cell's levers to a pipeline
the user loaded, with the renderer's code, and `call_kwargs` makes the renderer's call, so the judged samples come
back bit for bit; the winner file round-trips through apply; every refusal says why and applies nothing.

The cells are rendered once per module, in process, by the real renderer (no anchor: apply needs none); each test
loads a fresh pipeline from the model's folder, as a user's serving code would."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest

import hypergrid
from assess.winner.contract import Evidence, read_winner, write_winner
from assess.winner.judged import winner_of
from render.app import PIPELINES
from render.cell import build_job
from render.rundir import SampleStore, digest, load_run
from render.run.runner import png_bytes, run_job
from tests.conftest import compose_cfg

FBCACHE = ("model=tiny", "steps=4", "cache=fbcache", "cache.threshold=0.2")
REGIONAL = (*FBCACHE, "compile=regional", "compile.backend=eager")  # eager: dynamo's capture without kernel generation
SHAPES = ("model=shapes", "steps=4", "scheduler=dpmpp-2m")  # the shapes demo's winner (docs/climb.md)


def _render(out: Path, name: str, *overrides: str) -> Path:
    given = ["device=cpu", "prompts.limit=1", "render_anchor=false", *overrides, f"out_root={out}"]
    run_dir = out / "sweep" / name
    (result,) = run_job(build_job(compose_cfg(*given)), run_dir, store=SampleStore(out), pipelines=PIPELINES,
                        overrides=given)
    assert result.status == "done", result.message
    PIPELINES.clear()  # each test loads its own pipeline, fresh
    return run_dir


@pytest.fixture(scope="module")
def runs(tiny_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("winner-runs")
    return {"fbcache": _render(out, "fbcache", *FBCACHE), "shapes": _render(out, "shapes", *SHAPES)}


def fresh(run_dir: Path) -> Any:
    """The run's model loaded the user's way: from_pretrained on its folder (float32, the CPU's dtype)."""
    from render.compose.introspect import pipeline_class
    from render.run.loader import model_source
    from render.compose.spec import ModelSpec

    model = ModelSpec(**{k: v for k, v in load_run(run_dir).cell["model"].items()})
    pipe = pipeline_class(model.pipeline).from_pretrained(model_source(model))
    pipe.set_progress_bar_config(disable=True)
    return pipe


def same_samples(pipe: Any, applied: hypergrid.Applied, run_dir: Path) -> None:
    for sample in load_run(run_dir).samples:
        output = pipe(**applied.call_kwargs(sample.prompt, sample.seed))
        assert digest(png_bytes(output.images[0], "a sample")) == sample.sha256, sample.prompt_id


@pytest.mark.parametrize("name", ["fbcache", "shapes"])
def test_a_cell_applied_to_a_freshly_loaded_pipeline_reproduces_its_judged_samples_bit_for_bit(
        runs: dict[str, Path], name: str) -> None:
    pipe = fresh(runs[name])
    applied = hypergrid.apply(pipe, runs[name])  # a run folder
    same_samples(pipe, applied, runs[name])


@pytest.mark.slow  # slow: dynamo traces the tiny transformer's blocks on the cell's first call (eager backend), ~10 s
def test_a_cached_and_regionally_compiled_cell_reproduces_its_judged_samples_bit_for_bit(tiny_cache: Path,
                                                                                         tmp_path: Path) -> None:
    run_dir = _render(tmp_path, "regional", *REGIONAL)
    pipe = fresh(run_dir)
    applied = hypergrid.apply(pipe, " ".join(REGIONAL))  # an override string
    assert applied.cell.axes["cache"] == {"name": "fbcache", "threshold": 0.2}
    assert applied.cell.axes["compile"]["name"] == "regional" and applied.cell.key == load_run(run_dir).cell_key
    same_samples(pipe, applied, run_dir)


def test_call_kwargs_are_the_renderers_own(runs: dict[str, Path]) -> None:
    from render.run.loader import call_kwargs

    pipe = fresh(runs["shapes"])
    applied = hypergrid.apply(pipe, runs["shapes"])
    ours, theirs = applied.call_kwargs("a red circle", 7), call_kwargs(applied.cell, "a red circle", 7)
    assert ours.pop("generator").initial_seed() == theirs.pop("generator").initial_seed() == 7
    assert ours == theirs and ours["num_inference_steps"] == 4
    assert type(pipe.scheduler).__name__ == "DPMSolverMultistepScheduler"  # scheduler=dpmpp-2m was applied


def _winner(run_dir: Path, **changes: Any) -> hypergrid.Winner:
    run = load_run(run_dir)
    evidence = Evidence(verdict="parity", metric="ssim", band=0.5, band_source="test", alpha=0.05, speedup=None,
                        timed="timed apart", quality=None, prompts=1, split="smoke")
    winner = winner_of([run], run.cell_key, evidence, {"kind": "sweep"})
    from dataclasses import replace

    return replace(winner, **changes)


def test_the_winner_file_round_trips_through_apply(runs: dict[str, Path], tmp_path: Path) -> None:
    written = write_winner(tmp_path, _winner(runs["fbcache"]))
    assert written.name == "winner.yaml" and read_winner(written) == _winner(runs["fbcache"])
    pipe = fresh(runs["fbcache"])
    applied = hypergrid.apply(pipe, written)
    assert applied.winner is not None and applied.overrides == read_winner(written).overrides
    same_samples(pipe, applied, runs["fbcache"])


# -- refusals: each with its reason, nothing applied ----------------------------------------------------------------


def _untouched(pipe: Any) -> tuple[str, list[str]]:
    from diffusers.hooks import HookRegistry

    from render.run.loader import denoiser

    registry = getattr(denoiser(pipe), "_diffusers_hook", None)
    hooks = list(registry.hooks) if isinstance(registry, HookRegistry) else []
    return type(pipe.scheduler).__name__, hooks


def test_a_winner_for_other_weights_is_refused_and_nothing_is_applied(runs: dict[str, Path], tmp_path: Path) -> None:
    import torch

    pipe = fresh(runs["fbcache"])
    with torch.no_grad():
        next(pipe.transformer.parameters()).add_(1.0)  # the user's fine-tune of the same model
    pipe.save_pretrained(tmp_path / "fine-tuned")
    theirs = type(pipe).from_pretrained(tmp_path / "fine-tuned")
    before = _untouched(theirs)
    with pytest.raises(ValueError, match=r"a winner for other weights: .*fine-tuned .*judged on model tiny"):
        hypergrid.apply(theirs, runs["fbcache"])
    assert _untouched(theirs) == before


def test_a_lever_this_pipeline_cannot_take_is_refused_before_any_lever_is_applied(runs: dict[str, Path]) -> None:
    pipe = fresh(runs["shapes"])
    before = _untouched(pipe)
    with pytest.raises(ValueError, match=r"a lever this pipeline cannot take: vae_tiling=true: .*has no VAE"):
        hypergrid.apply(pipe, "model=shapes scheduler=dpmpp-2m vae_tiling=true")
    assert _untouched(pipe) == before  # the scheduler, first in order, was not swapped


def test_a_pipeline_of_another_family_is_refused(runs: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match=r"this pipeline is a ShapesPipeline, .*model tiny is a FluxPipeline"):
        hypergrid.apply(fresh(runs["shapes"]), runs["fbcache"])


def test_a_lever_applied_at_load_points_to_hypergrid_load(runs: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match=r"applied when the weights load .*hypergrid.load"):
        hypergrid.apply(fresh(runs["shapes"]), "model=shapes quant=int8wo")


def test_a_winner_file_whose_lever_was_edited_is_refused_naming_it(runs: dict[str, Path], tmp_path: Path) -> None:
    winner = _winner(runs["fbcache"])
    edited = [o.replace("cache.threshold=0.2", "cache.threshold=0.3") for o in winner.overrides]
    path = write_winner(tmp_path, _winner(runs["fbcache"], overrides=edited))
    pipe = fresh(runs["fbcache"])
    before = _untouched(pipe)
    with pytest.raises(ValueError, match=r"cache.threshold: 0.2 recorded, 0.3 composed"):
        hypergrid.apply(pipe, path)
    assert _untouched(pipe) == before


def test_library_versions_that_differ_from_the_winners_are_a_warning_naming_them(runs: dict[str, Path],
                                                                                 tmp_path: Path) -> None:
    winner = _winner(runs["shapes"])
    path = write_winner(tmp_path, _winner(runs["shapes"], versions={**winner.versions, "torch": "1.0.0"}))
    with pytest.warns(hypergrid.VersionWarning, match=r"torch 2\.\S+ \(the winner's 1\.0\.0\)"):
        hypergrid.apply(fresh(runs["shapes"]), path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", hypergrid.VersionWarning)  # the winner's own versions: no warning
        hypergrid.apply(fresh(runs["shapes"]), write_winner(tmp_path / "same.yaml", winner))


def test_a_source_that_is_nothing_says_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no such winner file or run folder"):
        hypergrid.apply(object(), tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"neither a winner file \(winner.yaml\) nor a run folder"):
        hypergrid.apply(object(), tmp_path / "empty")
    shutil.rmtree(tmp_path / "empty")


def test_importing_hypergrid_imports_no_torch() -> None:
    import subprocess
    import sys

    code = "import sys, hypergrid; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_the_finals_incumbent_is_written_as_a_winner_file_with_its_holdout_result(runs: dict[str, Path],
                                                                                 tmp_path: Path) -> None:
    """Its evidence is the holdout's verdict; the samples `verify` renders again are the incumbent's dev samples,
    never the holdout's: the holdout is seen once, by the final (here the smoke run stands for the final's holdout
    sweep, a dev run of the same cell for the climb's)."""
    from types import SimpleNamespace

    from assess.climb.run_final import Arm, FinalResult, write_final_winner
    from assess.statistics.compare import Verdict

    run = load_run(runs["shapes"])
    dev_run = _render(tmp_path / "climb", "shapes-dev", *SHAPES, "prompts=dev")
    assert load_run(dev_run).cell_key == run.cell_key
    quality = {"mean": -0.001, "low": -0.004, "high": 0.002, "n": 1, "verdict": "parity"}
    speed = {"value": 7.7, "low": 6.9, "high": 8.4, "n": 20}
    result = FinalResult("demo", "2026-12-07T20:00:00+00:00", {}, "steps=4 scheduler=dpmpp-2m", "shapes_fit", 0.01,
                         0.05, [Arm("incumbent", ["steps=4", "scheduler=dpmpp-2m"], run.cell_key, quality=quality,
                                    speedup=speed, timed="side by side"), Arm("anchor", [], None)],
                         Verdict.PARITY, sweeps=[str(runs["shapes"].parent)])  # the final's type: a str Enum
    said: list[str] = []
    exp = SimpleNamespace(name="demo", out_root=tmp_path, holdout=SimpleNamespace(split="holdout"),
                          dev=SimpleNamespace(split=load_run(dev_run).split),
                          ledger=SimpleNamespace(out_roots=lambda: [tmp_path / "climb", runs["shapes"].parent.parent]))
    path = write_final_winner(result, exp, said.append)  # type: ignore[arg-type]
    assert path == tmp_path / "experiments" / "demo" / "winner.yaml" and said[-1].startswith(f"winner file: {path}")
    winner = read_winner(path)
    e = winner.evidence
    assert (e.verdict, e.split, e.timed, e.speedup, e.prompts) == ("parity", "holdout", "side by side", speed, 1)
    assert e.holdout is not None and e.holdout["verdict"] == "parity" and winner.source["kind"] == "final"
    dev_texts = {x.prompt for x in load_run(dev_run).samples}
    assert winner.samples and {x.prompt for x in winner.samples} <= dev_texts, "dev samples, not the holdout's"
    assert not {x.sha256 for x in winner.samples} & {x.sha256 for x in run.samples}
    pipe = fresh(runs["shapes"])
    same_samples(pipe, hypergrid.apply(pipe, path), dev_run)
