"""Issue 63, item 4: where a sample's time goes. The runner records each sample's seconds of text encoding, denoising
loop and VAE decode (render.run.stage_clock); the three add up to its latency within 5 % on the tiny models; the
clock changes nothing rendered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from render import rundir
from render.cell import build_job
from render.run import runner
from render.run.loader import PipelineCache
from render.run.stage_clock import StageClock, StageSplit, stage_clock
from tests.conftest import compose_cfg

PIPELINES = PipelineCache()  # one load per model for the module
ADDS_UP = 0.05  # the promise: text + denoise + vae within 5 % of the sample's latency


def _render(out_root: Path, model: str, *overrides: str, device: str = "cpu") -> list[dict]:
    job = build_job(compose_cfg(f"model={model}", f"device={device}", "prompts.limit=3", "render_anchor=false",
                                *overrides, out_root=out_root))
    (result,) = runner.run_job(job, out_root / "runs" / model, store=rundir.SampleStore(job.out_root),
                               pipelines=PIPELINES, overrides=list(overrides))
    assert result.status == "done", result
    return [json.loads(line) for line in (result.run_dir / rundir.SAMPLES).read_text().splitlines()]


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


ON_GPU = pytest.param("cuda", marks=pytest.mark.skipif(not _cuda(), reason="CUDA events: a GPU machine's check"))


@pytest.mark.parametrize("device", ["cpu", ON_GPU])
@pytest.mark.parametrize("model", ["tiny", "shapes"])
def test_a_samples_three_stages_add_up_to_its_latency_within_5_percent(model: str, device: str, tiny_cache: Path,
                                                                         tmp_path: Path) -> None:
    records = _render(tmp_path / "out", model, "steps=8", device=device)
    for record in records:
        parts = (record["text_s"], record["denoise_s"], record["vae_s"])
        assert all(isinstance(p, float) and p >= 0 for p in parts), record
        assert abs(sum(parts) - record["latency_s"]) <= ADDS_UP * record["latency_s"], (model, parts, record["latency_s"])
        assert record["text_s"] > 0 and record["denoise_s"] > record["text_s"], (model, parts)
        if model == "tiny":
            assert record["vae_s"] > 0, "a latent model's decode is timed"
        else:
            assert record["vae_s"] == 0, "the shapes model renders pixels: it has no VAE to decode"


def test_the_denoising_stage_grows_with_the_steps_and_the_others_do_not(tiny_cache: Path, tmp_path: Path) -> None:
    few = [r for r in _render(tmp_path / "few", "tiny", "steps=2", "seed=5") if not r["warmup"]]
    many = [r for r in _render(tmp_path / "many", "tiny", "steps=16", "seed=5") if not r["warmup"]]

    def median(records: list[dict], key: str) -> float:
        values = sorted(r[key] for r in records)
        return values[len(values) // 2]

    assert median(many, "denoise_s") > 3 * median(few, "denoise_s")
    assert median(many, "vae_s") < 3 * median(few, "vae_s") and median(many, "text_s") < 3 * median(few, "text_s")


def test_the_stage_clock_changes_nothing_rendered_and_leaves_the_pipeline_as_it_was(tiny_cache: Path) -> None:
    job = build_job(compose_cfg("model=tiny", "device=cpu", "prompts.limit=1", "steps=2", "render_anchor=false"))
    loaded = PIPELINES.get(job.cell.model, job.device)
    from render.run.loader import call_kwargs, configure

    configure(loaded, job.cell, calibrate=None)
    text, seed = job.prompts[0].text, job.seeds[0]
    bare = loaded.pipe(**call_kwargs(job.cell, text, seed)).images[0]
    with stage_clock(loaded.pipe, "cpu") as clock:
        assert "encode_prompt" in vars(loaded.pipe) and "decode" in vars(loaded.pipe.vae)
        clock.mark("call", "start")
        timed = loaded.pipe(**call_kwargs(job.cell, text, seed)).images[0]
        clock.mark("call", "end")
    assert (bare == timed).all()
    assert "encode_prompt" not in vars(loaded.pipe) and "decode" not in vars(loaded.pipe.vae)
    split = clock.split()
    assert split.text_s > 0 and split.vae_s > 0 and split.denoise_s > 0


def test_a_split_is_read_off_the_marks_in_call_order() -> None:
    clock = StageClock("cpu")
    for what, edge, t in [("call", "start", 0.0), ("text", "start", 0.5), ("text", "end", 1.5), ("text", "start", 1.5),
                          ("text", "end", 2.0), ("vae", "start", 9.0), ("vae", "end", 11.0), ("call", "end", 11.25)]:
        clock.marks.append((what, edge, t))
    assert clock.split() == StageSplit(text_s=2.0, denoise_s=7.0, vae_s=2.25)  # checks to text, pixels to vae
    no_vae = StageClock("cpu")
    no_vae.marks = [("call", "start", 0.0), ("text", "start", 0.0), ("text", "end", 1.0), ("call", "end", 5.0)]
    assert no_vae.split() == StageSplit(text_s=1.0, denoise_s=4.0, vae_s=0.0)


def test_a_repeated_samples_split_is_its_median_calls() -> None:
    splits = [StageSplit(0.1, 1.0, 0.2), StageSplit(0.1, 3.0, 0.2), StageSplit(0.1, 2.0, 0.2)]
    assert runner.median_split([1.3, 3.3, 2.3], splits) == splits[2]
    assert runner.median_split([1.3, 3.3], splits[:2]) == splits[0]
