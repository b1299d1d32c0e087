"""The parallel axis (render.axes.parallel) and a parallel cell's ranks (render.run.ranks), on the tiny Flux twin:
context parallelism with Ulysses runs on the CPU as gloo processes, so the width-2 tests render for real."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from render.axes import AxisError
from render.axes.base import Where
from render.axes.parallel import check_parallel, ParallelConf, width_of
from render.cell import build_job
from render.run.preflight import check_job
from tests.conftest import compose_cfg, run_render


def _cell(*overrides: str):
    return build_job(compose_cfg("model=tiny", "device=cpu", *overrides)).cell


def test_none_stays_out_of_the_key_and_an_option_enters_it(tiny_cache: Path) -> None:
    none, ulysses = _cell(), _cell("parallel=ulysses")
    assert none.axes["parallel"] is None and "parallel" not in none.canonical()
    assert ulysses.canonical()["parallel"] == {"name": "ulysses", "ulysses_degree": 2, "ring_degree": 1, "tp_degree": 1}
    assert ulysses.key != none.key and width_of(ulysses.axes["parallel"]) == 2
    assert width_of(_cell("parallel=usp").axes["parallel"]) == 4


@pytest.mark.parametrize(("overrides", "message"), [
    (["parallel=ring"], "parallel=ring does not run on the CPU"),
    (["parallel=tensor"], "parallel=tensor does not run on the CPU"),
    (["parallel=ulysses", "parallel.ulysses_degree=4"], "splits the 2 attention heads of tiny over 4 ranks"),
    (["parallel=ulysses", "height=36", "width=36"], "splits the 81 image tokens"),
    (["parallel=ulysses", "model=sdxl"], "has no _cp_plan in diffusers"),
])
def test_preflight_refuses_what_cannot_run(overrides: list[str], message: str, tiny_cache: Path, tmp_path: Path) -> None:
    job = build_job(compose_cfg("model=tiny", "device=cpu", *overrides, out_root=tmp_path))
    with pytest.raises(AxisError, match=message):
        check_job(job)


@pytest.mark.parametrize(("overrides", "message"), [
    (["model=tiny-wan", "height=48", "width=48"], "splits the 27 video tokens of a 48x48 tiny-wan sample over 2 ranks"),
    (["model=tiny-qwen-image"], "splits the text sequence of tiny-qwen-image .qwen-image family., whose length follows "
                                "each prompt .diffusers does not pad it.: a split over 2 ranks fails"),
])
def test_preflight_refuses_a_family_sequence_the_split_would_break(overrides: list[str], message: str, twin_cache: Path,
                                                                   tmp_path: Path) -> None:
    """Each family's own geometry (render.models.families._tokens): before, a Wan cell crashed preflight (its
    patch_size is a list) and a Qwen-Image cell passed it, then failed at its first call in diffusers' sharder."""
    job = build_job(compose_cfg("model=tiny", "device=cpu", "parallel=ulysses", *overrides, out_root=tmp_path))
    with pytest.raises(AxisError, match=message):
        check_job(job)


@pytest.mark.slow
@pytest.mark.parametrize(("model", "blocks", "size"), [("tiny", "transformer_blocks", (32, 48)),
                                                       ("tiny-flux2", "transformer_blocks", (48, 32)),
                                                       ("tiny-qwen-image", "transformer_blocks", (32, 48)),
                                                       ("tiny-wan", "blocks", (48, 32))])
def test_each_family_s_sequence_lengths_are_what_its_denoiser_is_handed(model: str, blocks: str, size: tuple[int, int],
                                                                        twin_cache: Path) -> None:
    """The lengths preflight checks against the ones diffusers' sharder sees: the first block's inputs, one step."""
    import torch
    from diffusers import DiffusionPipeline

    from render.models.families import family
    from render.models.families._tokens import Shape
    from render.run.loader import builtin_folder

    cell = _cell(f"model={model}", f"height={size[0]}", f"width={size[1]}")
    folder = builtin_folder(cell.model.id)
    configs = [json.loads((folder / part / "config.json").read_text()) for part in ("transformer", "vae")]
    expected = family(cell.model.family).split_sequences(Shape(cell.height, cell.width, cell.model.num_frames,
                                                                cell.model.max_sequence_length, *configs))
    pipe = DiffusionPipeline.from_pretrained(folder)
    seen: dict[str, int] = {}

    def record(module, args, kwargs):  # noqa: ANN001
        hidden = args[0] if args else kwargs["hidden_states"]
        text = args[1] if len(args) > 1 else kwargs.get("encoder_hidden_states")
        seen.setdefault("hidden", hidden.shape[1])
        seen.setdefault("text", text.shape[1] if text is not None else 0)

    getattr(pipe.transformer, blocks)[0].register_forward_pre_hook(record, with_kwargs=True)
    extra = {"num_frames": cell.model.num_frames} if cell.model.num_frames else {}
    with torch.no_grad():
        pipe(prompt="a red circle", num_inference_steps=1, height=cell.height, width=cell.width, output_type="latent",
             max_sequence_length=cell.model.max_sequence_length, generator=torch.Generator().manual_seed(0), **extra)
    assert seen["hidden"] == expected.get("image", expected.get("video"))
    if "text" in expected and expected["text"] is not None:  # None: the prompt's own length (refused above)
        assert seen["text"] == expected["text"]


def test_a_bad_degree_is_refused_at_composition() -> None:
    with pytest.raises(AxisError, match="parallel=ulysses takes no tp_degree"):
        ParallelConf(name="ulysses", ulysses_degree=2, tp_degree=2)
    with pytest.raises(AxisError, match="valid values are none, ulysses, ring, usp, tensor"):
        ParallelConf(name="pipefusion")


def test_a_cell_wider_than_the_machine_is_refused(tiny_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # a one-GPU machine
    cell = _cell("parallel=ulysses")
    with pytest.raises(AxisError, match="is 2 GPUs wide and this machine has 1; valid widths here are 1 to 1"):
        check_parallel(ParallelConf(**cell.axes["parallel"]), cell, Where("cuda:0", "NVIDIA H200", cell.model.pipeline))


def test_the_command_line_refusal_exits_2(tmp_path: Path, tiny_cache: Path) -> None:
    result = run_render("model=tiny", "device=cpu", "parallel=ring", f"out_root={tmp_path}", cwd=tmp_path)
    assert result.returncode == 2 and "parallel=ring does not run on the CPU (gloo); on the CPU use one of none, ulysses" in result.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_cell_wider_than_the_gpus_launchers_gpus_exits_2_before_any_folder(tmp_path: Path, tiny_cache: Path) -> None:
    result = run_render("-m", "hydra/launcher=gpus", "hydra.launcher.gpus=[0]", "model=tiny", "device=cpu",
                        "parallel=none,ulysses", f"out_root={tmp_path}", f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "is 2 GPUs wide and hydra/launcher=gpus has 1 (0); valid widths here are 1 to 1" in result.stderr
    assert not (tmp_path / "sweep").exists()


def _run_dir(out_root: Path) -> Path:
    (folder,) = [p.parent for p in out_root.glob("runs/*/*/run.json")]
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("model", ["tiny", "tiny-wan"])  # an image, a clip (compared frame by frame)
def test_a_width_2_ulysses_cell_renders_like_its_width_1_twin(model: str, tmp_path: Path, twin_cache: Path) -> None:
    from assess.index.database import Index
    from assess.statistics.parity import drifting
    from assess.scoring.ingest import score

    out_root = tmp_path / "out"
    wide = run_render(f"model={model}", "device=cpu", "render_anchor=false", "prompts.limit=1", "parallel=ulysses",
                      "seed=[0]", f"out_root={out_root}", cwd=tmp_path)
    assert wide.returncode == 0, wide.stderr
    # the twin (width 1) was rendered alongside, into its own folder
    images = [np.asarray(Image.open(next(out_root.glob(f"{r}/images/*.png"))), dtype=float)
              for r in ("runs/*/*", f"twins/{model}/*/*")]
    assert np.abs(images[0] - images[1]).max() <= 1  # 8-bit PNGs of pixels that differ by < 1e-6 (docs/parallel.md)
    score([out_root], tmp_path / "index.db", metrics=["psnr"])
    run = json.loads((_run_dir(out_root) / "run.json").read_text())
    with Index.open(tmp_path / "index.db") as index:
        (row,) = index.parity(run["cell_key"])
        assert row["max_levels"] <= 1 and row["ssim"] > 0.999 and drifting([row]) is None


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
def test_a_killed_rank_ends_the_cell_with_failed_json_naming_it_and_a_rerun_renders_the_rest(tmp_path: Path, tiny_cache: Path) -> None:
    import subprocess
    import sys

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    args = ["model=tiny", "device=cpu", "render_anchor=false", "parallel=ulysses", "prompts.limit=1",
            "seed=[0,1,2,3,4,5,6,7]", f"out_root={tmp_path}"]
    render = subprocess.Popen([sys.executable, "-m", "render", *args],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("runs/*/*/samples.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.2)  # the ranks have met once rank 0 recorded a sample
    (rank1,) = _children(render.pid)
    os.kill(rank1, signal.SIGKILL)
    output, _ = render.communicate(timeout=120)
    assert render.returncode == 1, output
    failed = json.loads((_run_dir(tmp_path) / "FAILED.json").read_text())
    assert failed["category"] == "error"
    assert failed["message"].startswith(f"RankFailed: rank 1 (pid {rank1}) was killed by SIGKILL")
    done = failed["n_samples_done"]
    assert 1 <= done < 8
    resumed = run_render(*args, cwd=tmp_path)  # a new run of the cell renders only what is missing
    assert resumed.returncode == 0, resumed.stderr
    assert f"{8 - done} rendered, {done} reused" in resumed.stdout + resumed.stderr


def test_a_parallel_cell_costs_its_width_in_gpu_seconds(tiny_cache: Path) -> None:
    from render.cell import single_device_job
    from render.laws.admission import FIRST_LAUNCH_MARGIN, History, estimate_jobs
    from render.run.preflight import measure_one_sample
    from render.rundir.records import SampleRecord

    wide = build_job(compose_cfg("model=tiny", "device=cpu", "parallel=ulysses"))
    one = single_device_job(wide)
    assert (wide.gpus, one.gpus, one.cell.key) == (2, 1, build_job(compose_cfg("model=tiny", "device=cpu")).cell.key)
    for job in (wide, one):  # a sample measured at 1 s on one device costs width x 1 s (no speed-up assumed)
        estimate = estimate_jobs([job], {job.cell.key: 3}, History([]), measure=lambda job: (1.0, 0.0))
        assert estimate.seconds == pytest.approx(3 * FIRST_LAUNCH_MARGIN * job.gpus)
    seconds, _ = measure_one_sample(wide)  # preflight measures the width-1 self: no ranks before the render
    assert seconds > 0
    record = SampleRecord(cell_key="k", prompt_id="p", seed=0, prompt="t", image="i.png", width=32, height=32,
                          latency_s=0.5, warmup=False, steps=8, s_per_step=None, peak_mem_bytes=None, mem_kind=None,
                          load_s=None, reused_from=None, finished_at=None, latency_calls=(0.5, 0.7), gpus=2)
    assert record.device_s == pytest.approx(2.4)


def test_a_parallel_cell_renders_its_width_1_twin_alongside(tiny_cache: Path, tmp_path: Path) -> None:
    from render.cell import twin_dir, twin_job
    from render.run.runner import twin_overrides

    wide = build_job(compose_cfg("model=tiny", "device=cpu", "parallel=ulysses", out_root=tmp_path))
    one = build_job(compose_cfg("model=tiny", "device=cpu", out_root=tmp_path))
    twin = twin_job(wide)
    assert twin is not None and twin_job(one) is None  # a width-1 cell has no twin
    assert (twin.cell.key, twin.gpus, twin.render_anchor) == (one.cell.key, 1, False)  # the anchor is rendered apart
    assert twin_dir(wide) == tmp_path / "twins" / "tiny" / one.cell.key
    assert twin_overrides(["model=tiny", "parallel=ulysses", "parallel.ulysses_degree=4", "+parallel.x=1", "seed=0"]) == [
        "model=tiny", "seed=0", "parallel=none"]
