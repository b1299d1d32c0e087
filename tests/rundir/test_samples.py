"""Skip-if-done with verified samples, in-process on the tiny model: damaged, truncated, swapped and
re-texted samples are rendered again, never linked; failures are recorded even on a full disk; the
watchdog flags a render slowed on purpose."""

from __future__ import annotations

import errno
import json
import logging
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from assess.status import status
from render import rundir
from render.run import runner
from render.cell import build_job
from render.run.loader import PipelineCache
from tests.conftest import compose_cfg

PIPELINES = PipelineCache()  # one tiny model load for the whole module


def render(out_root: Path, name: str, *overrides: str, prompts_file: Path | None = None) -> runner.CellResult:
    extra = [f"prompts.file={prompts_file}"] if prompts_file else []
    job = build_job(compose_cfg("model=tiny", "steps=2", "prompts.limit=4", "render_anchor=false", *extra, *overrides,
                                out_root=out_root))
    (result,) = runner.run_job(job, out_root / "runs" / name, store=rundir.SampleStore(job.out_root), pipelines=PIPELINES,
                               overrides=list(overrides))
    return result


@pytest.fixture
def first(tiny_cache: Path, tmp_path: Path) -> Path:
    result = render(tmp_path / "out", "first")
    assert (result.status, result.n_rendered) == ("done", 4)
    return result.run_dir


@pytest.mark.slow
def test_a_rerun_reuses_every_verified_sample(first: Path) -> None:
    second = render(first.parents[1], "second")
    assert (second.n_rendered, second.n_reused) == (0, 4)
    assert (second.run_dir / "images" / "smoke-000__s0.png").stat().st_ino == (first / "images" / "smoke-000__s0.png").stat().st_ino


@pytest.mark.slow
def test_truncated_bitflipped_and_swapped_images_are_rendered_again(first: Path, caplog: pytest.LogCaptureFixture) -> None:
    images = first / "images"
    truncated, flipped, a, b = (images / f"smoke-00{i}__s0.png" for i in range(4))
    truncated.write_bytes(truncated.read_bytes()[:100])
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0x01
    flipped.write_bytes(bytes(data))
    swap = a.read_bytes()
    a.write_bytes(b.read_bytes())
    b.write_bytes(swap)
    caplog.set_level(logging.WARNING, "render")
    second = render(first.parents[1], "second")
    assert (second.n_rendered, second.n_reused) == (4, 0), "a damaged or swapped file was linked"
    assert caplog.text.count("not reusing sample") == 4
    for record in rundir.read_samples(second.run_dir, second.cell_key)[0]:
        assert rundir.verify(rundir.ExistingSample(second.run_dir, record)) is None


@pytest.mark.slow
def test_a_damaged_sample_in_a_resumed_folder_is_replaced_with_one_new_record(first: Path) -> None:
    (first / "DONE.json").unlink()
    (first / "images" / "smoke-002__s0.png").write_bytes(b"not a png")
    again = render(first.parents[1], "first")
    assert (again.n_rendered, again.n_reused) == (1, 0)
    records, problems = rundir.read_samples(first, again.cell_key)
    assert len(records) == 4 and not problems
    assert all(rundir.verify(rundir.ExistingSample(first, r)) is None for r in records)


@pytest.mark.slow
def test_a_prompt_with_the_same_id_but_another_text_is_another_sample(first: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "edited.jsonl"
    texts = ["a red circle in the centre", "something else entirely", "x", "y"]
    manifest.write_text("".join(json.dumps({"id": f"smoke-00{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    original = {r.prompt_id: r.prompt for r in rundir.read_samples(first, json.loads((first / "run.json").read_text())["cell_key"])[0]}
    second = render(first.parents[1], "second", prompts_file=manifest)
    same = sum(original[f"smoke-00{i}"] == t for i, t in enumerate(texts))
    assert (second.n_reused, second.n_rendered) == (same, 4 - same)


def test_a_failure_is_recorded_with_its_sample_and_a_full_disk_does_not_stop_the_sweep(
        tiny_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    real = runner.render_samples

    def fail_on_third(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("boom")
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "render_samples", fail_on_third)
    failed = render(tmp_path / "out", "a")
    record = json.loads((failed.run_dir / "FAILED.json").read_text())
    assert record["category"] == "error" and record["n_samples_done"] == 2
    assert record["sample"] == {"prompt_id": "smoke-002", "seed": 0}

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    calls["n"] = 0
    monkeypatch.setattr(rundir, "write_failed", no_space)
    result = render(tmp_path / "out", "b", "steps=3")  # returns: the sweep's next cell still runs
    assert result.status == "failed" and "FAILED.json could not be written" in result.message
    assert "No space left on device" in result.message


def test_a_short_write_of_a_record_fails_the_cell_and_leaves_no_torn_record(
        tiny_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = rundir.files.os.write
    seen = {"records": 0}

    def disk_fills(fd: int, data: bytes) -> int:
        if b'"prompt_id"' in bytes(data):
            seen["records"] += 1
            if seen["records"] == 3:
                return real_write(fd, bytes(data)[:40])
        return real_write(fd, data)

    monkeypatch.setattr(rundir.files.os, "write", disk_fills)
    result = render(tmp_path / "out", "a")
    assert result.status == "failed" and "ShortWrite" in result.message
    records, problems = rundir.read_samples(result.run_dir, result.cell_key)
    assert len(records) == 2 and not problems
    monkeypatch.setattr(rundir.files.os, "write", real_write)
    again = render(tmp_path / "out", "b")  # the next run keeps the two finished samples
    assert (again.n_reused, again.n_rendered) == (2, 2)
    done = json.loads((again.run_dir / "DONE.json").read_text())
    records, problems = rundir.read_samples(again.run_dir, again.cell_key)
    assert done["n_samples"] == len(records) == 4 and not problems


@pytest.mark.slow
def test_the_watchdog_flags_a_render_slowed_on_purpose(first: Path, monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    real = runner.render_samples
    seen: list = []

    run_dir = first.parents[1] / "runs" / "slow"

    def slowed(loaded, job, prompts, seeds, calls=1):
        pngs, latencies, memory, kind = real(loaded, job, prompts, seeds, calls)
        delay = 2 * json.loads((run_dir / "run.json").read_text())["estimate"]["s_per_sample"] + 2  # >2x, whatever the machine
        time.sleep(delay)
        if len(list((run_dir / "images").glob("*.png"))) == 2:  # mid-cell, as `assess status` would see it
            seen.extend(status(run_dir, now=datetime.now(timezone.utc)))
        return pngs, [latency + delay for latency in latencies], memory, kind

    monkeypatch.setattr(runner, "render_samples", slowed)
    caplog.set_level(logging.WARNING, "render")
    result = render(first.parents[1], "slow", "seed=[1]")  # same cell, new samples: history gives the estimate
    assert result.n_rendered == 4
    assert "watchdog: cell" in caplog.text and "estimate from history" in caplog.text
    (row,) = seen
    assert row.state == "running" and row.slow and row.detail.startswith("SLOW")
    assert not (result.run_dir / "FAILED.json").exists(), "the watchdog kills nothing"


def test_the_projection_takes_a_rendered_sample_without_a_finish_time() -> None:
    """A sample record without finished_at (the field is optional) counts from the run's start, and the
    latest finish time among the others is where the stall is measured from; max() once compared None."""
    import dataclasses
    from datetime import timedelta

    from render.rundir.watchdog import project

    started = datetime(2026, 1, 1, tzinfo=timezone.utc)
    blank = {f.name: None for f in dataclasses.fields(rundir.SampleRecord)}

    def sample(finished_at: str | None) -> rundir.SampleRecord:
        return rundir.SampleRecord(**{**blank, "cell_key": "k", "prompt_id": "p", "seed": 0, "image": "i.png",
                                      "warmup": False, "latency_s": 1.0, "finished_at": finished_at})

    samples = [sample((started + timedelta(seconds=5)).isoformat()), sample(None)]
    run = rundir.RunRecord(3, "k", {}, rundir.AnchorRef("a"), False, rundir.PromptsRef("smoke", ("p",)), (0,),
                           started_at=started.isoformat(), estimate={"n_pending": 3, "s_per_sample": 1.0})
    projection = project(run, samples, started + timedelta(seconds=10))
    assert projection is not None
    assert (projection.estimate_s, projection.projected_s, projection.source) == (3.0, 15.0, "history")


def test_the_renderers_own_check_right_after_a_sample_sees_nothing_in_progress() -> None:
    """Records say their finish time to the second: taken right after a fast sample, the time since the last
    finish (up to a second of rounding) once counted as a stalling sample, and a steady 0.05 s cell (an interleaved
    sweep's, every sample warm) was flagged at 6 s against 0.3 s."""
    import dataclasses
    from datetime import timedelta

    from render.rundir.watchdog import project

    started = datetime(2026, 1, 1, tzinfo=timezone.utc)
    blank = {f.name: None for f in dataclasses.fields(rundir.SampleRecord)}
    samples = [rundir.SampleRecord(**{**blank, "cell_key": "k", "prompt_id": "p", "seed": 0, "image": "i.png",
                                      "warmup": False, "latency_s": 0.05, "finished_at": started.isoformat()})]
    run = rundir.RunRecord(3, "k", {}, rundir.AnchorRef("a"), False, rundir.PromptsRef("smoke", ("p",)), (0,),
                           started_at=started.isoformat(), estimate={"n_pending": 6})
    right_after = project(run, samples, None)
    assert right_after is not None and not right_after.overdue and right_after.projected_s == pytest.approx(0.3)
    stalled = project(run, samples, started + timedelta(seconds=3))
    assert stalled is not None and stalled.overdue, "from outside (assess status), a stall still shows"


def test_an_interrupted_cell_is_named_by_its_overrides_in_its_error_line(
        tiny_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The Ctrl-C line names the cell as the report and status do (`steps=3 cache=none`), never by its hex key."""
    from render.run.signals import Cancelled

    def interrupted(*args, **kwargs):
        raise Cancelled("received SIGINT", 2)

    monkeypatch.setattr(runner, "render_samples", interrupted)
    caplog.set_level(logging.ERROR, "render")
    try:
        result = render(tmp_path / "out", "a", "steps=3", "cache=none")
        key = result.cell_key
    except Cancelled:
        key = json.loads((tmp_path / "out" / "runs" / "a" / "run.json").read_text())["cell_key"]
    assert "cell steps=3 cache=none failed (cancelled): Cancelled: received SIGINT" in caplog.text, caplog.text
    assert key not in caplog.text and key[:12] not in caplog.text


def test_a_single_runs_summary_names_the_cell_by_its_overrides(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    from render.app import print_summary
    from render.rundir import CellState

    key = "6b06c966dfcd1f49" * 4
    print_summary([runner.CellResult(tmp_path / "a", key, "steps=8 cache=fbcache", CellState.DONE, 6),
                   runner.CellResult(tmp_path / "b", key, "steps=4", CellState.FAILED, category=runner.Category.OOM,
                                     message="out of memory")])
    done, failed, where = capsys.readouterr().out.splitlines()
    assert done == f"done    steps=8 cache=fbcache: 6 rendered, 0 reused  {tmp_path / 'a'}"
    assert failed == "FAILED  steps=4: oom: out of memory" and key[:12] not in done + failed


def test_a_linked_sample_is_the_same_image_under_this_runs_prompt_id_with_no_load_time_and_names_its_source(
        tmp_path: Path) -> None:
    """link_sample called directly (the rerun tests above that reach it render the tiny model: slow tier)."""
    from render.rundir.store import ExistingSample, link_sample

    out, png = tmp_path / "out", b"\x89PNG not decoded here"
    source, target = out / "runs" / "a", out / "runs" / "b"
    image = f"{rundir.IMAGES}/{rundir.image_name('p1', 3)}"
    rundir.atomic_write_bytes(source / image, png)
    record = rundir.SampleRecord(
        cell_key="k", prompt_id="p1", prompt="a cube", seed=3, image=image, width=8, height=8, latency_s=0.25,
        warmup=False, steps=2, s_per_step=0.125, peak_mem_bytes=1, mem_kind="cpu-rss-hwm", load_s=1.5,
        reused_from=None, finished_at="2026-11-30T10:04:14+00:00", sha256=rundir.digest(png), bytes=len(png),
        prompt_sha=rundir.sample_text_hash("a cube"))
    linked = link_sample(ExistingSample(source, record), target, out, prompt_id="p2")
    assert (linked.prompt_id, linked.image, linked.reused_from, linked.load_s) == \
        ("p2", f"{rundir.IMAGES}/{rundir.image_name('p2', 3)}", "runs/a", 0.0)  # no model was loaded for it
    assert (linked.latency_s, linked.sha256, linked.seed) == (0.25, record.sha256, 3)  # its render's, as it was
    assert (target / linked.image).read_bytes() == png
