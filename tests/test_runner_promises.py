"""The runner's promises that mutation testing found unguarded (issue 59), each in process on the tiny model:
non-finite pixels fail their cell, a batched cell renders each sample once in calls of its batch, a damaged file
is never reused, and a failing cell is isolated both in an interleaved sweep and in a multirun's process."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from render import rundir
from render.cell import build_job
from render.run import runner
from render.run.loader import PipelineCache
from tests.conftest import compose_cfg

PIPELINES = PipelineCache()  # one tiny model load for the whole module


def _render(out_root: Path, name: str, *overrides: str) -> runner.CellResult:
    """The cell's own result (a batched cell renders its batch-1 twin beside it, render.run.runner)."""
    job = build_job(compose_cfg("model=tiny", "steps=2", "render_anchor=false", *overrides, out_root=out_root))
    results = runner.run_job(job, out_root / "runs" / name, store=rundir.SampleStore(out_root), pipelines=PIPELINES,
                             overrides=list(overrides))
    (result,) = [r for r in results if r.cell_key == job.cell.key]
    return result


@pytest.fixture(autouse=True, scope="module")
def loaded_once(tiny_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The tiny pipeline loaded (and diffusers imported) once for the module, not inside its first test."""
    assert _render(tmp_path_factory.mktemp("warm"), "warm", "prompts.limit=1").status == rundir.CellState.DONE


def test_non_finite_pixels_fail_the_cell_as_non_finite_output_and_record_no_sample(
        tiny_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = runner.timed_call

    def nan_pixels(*args: Any, **kwargs: Any) -> tuple[Any, float]:
        pixels, seconds = real(*args, **kwargs)
        return pixels * float("nan"), seconds

    monkeypatch.setattr(runner, "timed_call", nan_pixels)
    result = _render(tmp_path / "out", "nan", "prompts.limit=1")
    assert result.status == rundir.CellState.FAILED, "a NaN image was written as a finished sample"
    assert result.category == rundir.Category.NON_FINITE_OUTPUT, result
    record = json.loads((result.run_dir / "FAILED.json").read_text())
    assert record["category"] == "non-finite-output" and "non-finite pixels" in record["message"], record
    assert rundir.read_samples(result.run_dir, result.cell_key)[0] == [], "no record of the non-finite sample"


def test_a_batched_cell_renders_each_sample_once_in_calls_of_its_batch(
        tiny_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real, calls = runner.timed_batch, []

    def recorded(loaded: Any, cell: Any, device: str, prompts: Any, seeds: Any) -> Any:
        calls.append([(p, s) for p, s in zip(prompts, seeds)])
        return real(loaded, cell, device, prompts, seeds)

    monkeypatch.setattr(runner, "timed_batch", recorded)
    result = _render(tmp_path / "out", "b2", "prompts.limit=3", "batch=2")
    assert (result.status, result.n_rendered) == (rundir.CellState.DONE, 3), result
    samples = [s for call in calls for s in call]
    assert [len(c) for c in calls] == [2, 1], f"3 samples at batch 2 are a call of 2 and a call of 1, not {calls}"
    assert len(set(samples)) == len(samples) == 3, "a sample was rendered twice"
    records = sorted(rundir.read_samples(result.run_dir, result.cell_key)[0], key=lambda r: r.prompt_id)
    assert [r.batch for r in records] == [2, 2, 1], "each sample records the size of the call that rendered it"
    assert all(r.share_s == pytest.approx(r.latency_s / r.batch, abs=1e-5) for r in records), "and its share of the call's time"
    from PIL import Image

    assert all(Image.open(result.run_dir / r.image).size == (r.width, r.height) for r in records), "its size as drawn"


def test_batches_are_consecutive_windows_of_the_batch_with_no_overlap() -> None:
    samples = [(f"p{i}", f"text {i}", 0) for i in range(5)]
    assert runner.batches(samples, 2) == [samples[0:2], samples[2:4], samples[4:5]]
    assert runner.batches(samples, 1) == [[s] for s in samples]
    assert runner.batches([], 3) == []


def test_a_bitflipped_image_is_never_reused_and_its_intact_neighbour_is(
        tiny_cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "out"
    first = _render(out, "first", "prompts.limit=2")
    image = first.run_dir / "images" / "smoke-001__s0.png"
    data = bytearray(image.read_bytes())
    data[len(data) // 2] ^= 0x01  # same size, another sha256
    image.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING, "render")
    second = _render(out, "second", "prompts.limit=2")
    assert (second.n_rendered, second.n_reused) == (1, 1), "a damaged file was linked, or an intact one rendered again"
    assert caplog.text.count("not reusing sample") == 1, caplog.text
    records = rundir.read_samples(second.run_dir, second.cell_key)[0]
    for record in records:
        assert rundir.verify(rundir.ExistingSample(second.run_dir, record)) is None
    (linked,) = [r for r in records if r.reused_from is not None]
    assert (linked.prompt_id, linked.reused_from, linked.load_s) == ("smoke-000", "runs/first", 0.0), \
        "a linked sample names the run it came from and loaded nothing"


def test_a_killed_writers_temporary_files_are_removed_and_nothing_else(tmp_path: Path) -> None:
    from render.rundir.store import remove_stale_temporaries

    images = tmp_path / rundir.IMAGES
    images.mkdir()
    kept = [tmp_path / "samples.jsonl", images / "smoke-000__s0.png", tmp_path / "x.tmp"]
    stale = [tmp_path / ".samples.jsonl.tmp", images / ".smoke-001__s0.png.tmp"]
    for path in kept + stale:
        path.write_text("x")
    remove_stale_temporaries(tmp_path)
    assert [p.exists() for p in kept + stale] == [True] * 3 + [False] * 2


@pytest.mark.long("drive() gives each open cell a pipeline of its own: two tiny-model loads, 1.5-3.6 s on 2 busy cores")
def test_a_cell_failing_after_the_rounds_of_an_interleaved_sweep_is_its_own_and_the_others_finish(
        tiny_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session that could not run leaves its cells to `_finish`: one cell's failure there is recorded in its
    FAILED.json, and drive() still renders and closes the others, here its anchor (render.timing.interleave)."""
    from render.timing.interleave import Interleave

    real = runner.render_samples

    def fails_at_steps_3(loaded: Any, job: Any, *args: Any, **kwargs: Any) -> Any:
        if job.cell.steps == 3:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real(loaded, job, *args, **kwargs)

    monkeypatch.setattr(runner, "render_samples", fails_at_steps_3)
    monkeypatch.setattr(Interleave, "_session", lambda self, runs, outcome, bar: None)  # the session could not run
    out, interleave = tmp_path / "outputs", Interleave()
    given = ["model=tiny", "device=cpu", "prompts.limit=1", "render_anchor=true", "steps=3", f"out_root={out}"]
    results = runner.run_job(build_job(compose_cfg(*given)), out / "sweep" / "steps-3", store=rundir.SampleStore(out),
                             pipelines=PIPELINES, overrides=given, defer=interleave)
    assert len(interleave.runs) == 2, "the cell and its anchor were opened for the rounds"
    assert interleave.drive() is not None
    by_steps = {r.describe.split()[-1]: r for r in results if not r.is_anchor}
    assert by_steps["steps=3"].status == rundir.CellState.FAILED, by_steps
    assert "illegal memory access" in json.loads((by_steps["steps=3"].run_dir / "FAILED.json").read_text())["message"]
    others = [r for r in results if r is not by_steps["steps=3"]]
    assert others and all((r.run_dir / "DONE.json").exists() for r in others), "the other cells were left unfinished"


def _hydra_task(out: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """render.app.render_task as a Hydra job of `mode` (RUN or MULTIRUN) runs it, its cell failing in its render."""
    from hydra.core.hydra_config import HydraConfig
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from render import app
    from tests.conftest import CONF_DIR

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(runner, "render_samples", boom)
    overrides = ["model=tiny", "steps=2", "prompts.limit=1", "render_anchor=false", f"out_root={out}"]
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides, return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.mode = mode
        cfg.hydra.runtime.output_dir = str(out / "cell")
        cfg.hydra.overrides.task = overrides
    HydraConfig.instance().set_config(cfg)
    try:
        with open_dict(cfg):
            del cfg["hydra"]
        return app.render_task(cfg)
    finally:
        HydraConfig.instance().cfg = None


def test_a_failing_cell_in_a_multirun_process_returns_its_failure_and_the_process_goes_on(
        tiny_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (summary,) = _hydra_task(tmp_path / "out", "MULTIRUN", monkeypatch)
    assert summary["status"] == rundir.CellState.FAILED and "boom" in summary["message"], summary


def test_a_failing_cell_of_a_single_run_ends_the_process_with_exit_1(
        tiny_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit) as ended:
        _hydra_task(tmp_path / "out", "RUN", monkeypatch)
    assert ended.value.code == 1
