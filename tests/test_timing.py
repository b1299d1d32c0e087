"""Speed figures that survive a noisy machine (render/run/measure.py, assess/statistics/noise.py, docs/timing.md): the reference
workload per cell, repeated warm calls, the noise figure and flag, speed-ups paired by the job's reference, and
byte-identical cells never ranked apart. The noisy runs are made noisy on purpose: a pipeline that stalls on some
calls, a reference workload that reads a slower device at a cell's end."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from assess.statistics.noise import NOISY_ABOVE, noise, normalised
from assess.statistics.compare import paired_speedup, speed_order
from render.run import measure as timing
from render.app import PIPELINES
from render.cell import build_job
from render.rundir import SampleStore, read_samples
from render.run.runner import run_job
from tests.conftest import compose_cfg, run_render


def _render(tmp_path: Path, *overrides: str, folder: str = "run") -> Path:
    cfg = compose_cfg("model=tiny", "device=cpu", "prompts.limit=4", "steps=2", "render_anchor=false", *overrides,
                      out_root=tmp_path)
    run_dir = tmp_path / folder
    (result,) = run_job(build_job(cfg), run_dir, store=SampleStore(tmp_path), pipelines=PIPELINES, overrides=list(overrides))
    assert result.status == "done", result.message
    return run_dir


def test_each_cell_times_the_reference_at_its_start_and_end(tiny_cache: Path, tmp_path: Path) -> None:
    run_dir = _render(tmp_path)
    done = json.loads((run_dir / "DONE.json").read_text())["timing"]
    assert done["ref_start_s"] > 0 and done["ref_end_s"] > 0
    assert done["drift"] == pytest.approx(timing.drift(done["ref_start_s"], done["ref_end_s"]), abs=1e-3)
    records, _ = read_samples(run_dir, json.loads((run_dir / "run.json").read_text())["cell_key"])
    assert {r.ref_s for r in records} == {done["ref_start_s"]}  # every sample carries its cell's reference


def test_repeats_keep_every_call_and_the_budget_counts_them_all(tiny_cache: Path, tmp_path: Path) -> None:
    run_dir = _render(tmp_path, "timing.repeats=3")
    records, _ = read_samples(run_dir, json.loads((run_dir / "run.json").read_text())["cell_key"])
    warm = [r for r in records if not r.warmup]
    assert warm and all(len(r.latency_calls or ()) == 3 for r in warm)
    assert all(r.latency_s == sorted(r.latency_calls or ())[1] for r in warm)  # the median call
    assert all(r.latency_calls is None for r in records if r.warmup)  # a warm-up is one call
    done = json.loads((run_dir / "DONE.json").read_text())
    assert done["gpu_s"] == pytest.approx(sum(r.device_s for r in records), abs=1e-3)
    assert done["gpu_s"] > sum(r.latency_s or 0 for r in records) * 1.5  # three calls counted, not one


@pytest.mark.parametrize("value, expected", [("0", "timing.repeats=0"), ("-2", "timing.repeats=-2")])
def test_bad_timing_values_are_refused_before_anything_is_written(tmp_path: Path, value: str, expected: str) -> None:
    out = tmp_path / "out"
    result = run_render("model=tiny", f"timing.repeats={value}", f"out_root={out}", cwd=tmp_path)
    assert result.returncode != 0
    assert expected in result.stderr and "integer >= 1" in result.stderr
    assert not out.exists()


class Stalling:
    """A pipeline whose every other call stalls first (a job sharing its device with something else)."""

    def __init__(self, pipe, stall_s: float) -> None:
        self.pipe, self.stall_s, self.calls = pipe, stall_s, 0

    def __getattr__(self, name: str):
        return getattr(self.pipe, name)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls % 2 == 0:
            time.sleep(self.stall_s)
        return self.pipe(*args, **kwargs)


def _steady_reference(monkeypatch: pytest.MonkeyPatch, *values: float) -> None:
    """The reference workload reads `values` in turn (the last one from then on): a device as fast as that."""
    readings = list(values)
    monkeypatch.setattr(timing, "reference_workload", lambda device: readings.pop(0) if len(readings) > 1 else readings[0])
    monkeypatch.setattr(timing, "CLOCK", timing.Clock())
    monkeypatch.setattr("render.run.runner.CLOCK", timing.CLOCK)


@pytest.mark.slow
def test_a_noisy_job_is_flagged_in_status_index_and_report(tiny_cache: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from assess.index.database import Index
    from assess.report.write import write_report
    from assess.scoring.ingest import score
    from assess.status import format_plain, status
    from render.run.loader import PipelineCache

    _steady_reference(monkeypatch, 0.01)  # the reference sees nothing: the stalls show in the calls' spread
    pipelines = PipelineCache()
    real_get = pipelines.get

    def stalling_get(*args, **kwargs):
        loaded = real_get(*args, **kwargs)
        if not isinstance(loaded.pipe, Stalling):
            loaded.pipe = Stalling(loaded.pipe, 0.3)
        return loaded

    monkeypatch.setattr(pipelines, "get", stalling_get)
    cfg = compose_cfg("model=tiny", "device=cpu", "prompts=dev", "prompts.limit=7", "steps=2", "render_anchor=false",
                      out_root=tmp_path)
    (result,) = run_job(build_job(cfg), tmp_path / "noisy", store=SampleStore(tmp_path), pipelines=pipelines, overrides=[])
    assert result.status == "done"

    (row,) = status(tmp_path)
    assert row.detail.startswith("NOISY: warm calls spread"), row.detail
    assert "NOISY: warm calls spread" in format_plain([row])
    db = tmp_path / "index.db"
    score([tmp_path / "noisy"], index_path=db, metrics=["ssim"])
    with Index.open(db) as index:
        (figure,) = index.query("SELECT value, detail FROM cell_scores WHERE metric = 'speed_noise'")
        (latency,) = index.query("SELECT value, low, high FROM cell_scores WHERE metric = 'latency_median_s'")
    assert figure["value"] > NOISY_ABOVE and figure["detail"].startswith("noisy: warm calls spread")
    assert latency["low"] < latency["value"] < latency["high"]  # the interval shows the spread too
    html = write_report([tmp_path / "noisy"], index_path=db, out=tmp_path / "report")
    assert "noisy: warm calls spread" in html.read_text()


def test_a_device_that_slows_during_a_cell_is_flagged_by_the_references_drift(
        tiny_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assess.status import status

    _steady_reference(monkeypatch, 0.01, 0.02)  # the same workload took twice as long at the cell's end
    run_dir = _render(tmp_path)
    assert json.loads((run_dir / "DONE.json").read_text())["timing"]["drift"] == 1.0
    (row,) = status(tmp_path)
    assert row.detail.startswith("NOISY: ") and "reference drifted 100% during a run" in row.detail


def test_the_noise_figure_counts_the_calls_spread_and_the_references_drift() -> None:
    steady = [{"latency_s": 1.0, "ref_s": 0.01, "warmup": 0} for _ in range(6)]
    assert noise(steady).figure == 0 and not noise(steady).noisy
    assert noise(steady, [0.4]).noisy and "reference drifted 40%" in noise(steady, [0.4]).reason()
    spread = [{"latency_s": x, "ref_s": 0.01} for x in (1.0, 1.0, 1.5, 1.5, 1.0, 1.5)]
    assert noise(spread).noisy and noise(spread).reason().startswith("noisy: warm calls spread 40%")  # IQR 0.5 over the median 1.25
    # two jobs on devices of different speed: per reference, the same work is not noise
    two_jobs = [{"latency_s": 1.0, "ref_s": 0.01}] * 3 + [{"latency_s": 2.0, "ref_s": 0.02}] * 3
    assert noise(two_jobs).figure == 0
    assert noise([{"latency_s": 1.0}] * 3 + [{"latency_s": 2.0}] * 3).noisy  # no reference: counted as noise
    assert noise(steady[:2]).figure is None  # two calls: no spread measured, no drift recorded
    calls = [{"latency_s": 1.0, "latency_calls": json.dumps([1.0, 1.6, 0.9]), "ref_s": 0.01}] * 2
    assert noise(calls).n_calls == 6 and noise(calls).noisy


def test_speedups_pair_each_latency_with_its_own_jobs_reference() -> None:
    # the anchor rendered on a fast node, the cell on a node twice as slow: the cell is twice as fast in truth
    anchor = [{"latency_s": 1.0 + i * 0.01, "ref_s": 0.01} for i in range(6)]
    cell = [{"latency_s": 1.0 + i * 0.01, "ref_s": 0.02} for i in range(6)]
    paired = paired_speedup(anchor, cell)
    assert paired is not None and paired.value == pytest.approx(2.0, rel=1e-6)
    assert paired.low is not None and paired.low > 1.5 and "paired" in (paired.note or "")
    unpaired = paired_speedup([{"latency_s": r["latency_s"]} for r in anchor], cell)
    assert unpaired is not None and unpaired.value == pytest.approx(1.0) and "unpaired" in (unpaired.note or "")
    widened = paired_speedup(anchor, cell, 0.3, 0.4)
    assert widened is not None and widened.low < paired.low and widened.high > paired.high  # drift widens it
    assert normalised([{"latency_s": 1.0, "ref_s": None}]) is None


def _rows(latencies: list[float]) -> list[dict]:
    return [{"latency_s": x, "ref_s": 0.01, "prompt_sha": f"p{i}", "seed": 0} for i, x in enumerate(latencies)]


def test_byte_identical_cells_are_never_ranked_apart() -> None:
    fast = _rows([0.30 + i * 0.001 for i in range(8)])
    slow = _rows([0.60 + i * 0.001 for i in range(8)])  # the threefold-ish gap
    assert speed_order(fast, slow) == -1 and speed_order(slow, fast) == 1
    assert speed_order(fast, slow, same_work=True) == 0
    noisy = _rows([0.3, 0.6, 0.3, 0.6, 0.3, 0.6, 0.3, 0.6])
    assert speed_order(noisy, slow) == 0  # a cell flagged noisy is not ranked on speed
    close = _rows([0.3005 + i * 0.001 + (0.002 if i % 2 else -0.002) for i in range(8)])
    assert speed_order(fast, close) == 0  # within the interval
    assert speed_order(fast, slow, 0.1, 0.1) == -1  # a 2x gap stays beyond a 10 % drift on both sides
    assert speed_order(fast, slow, 0.2, 0.0) == 0  # a 20 % drift flags the cell noisy
    assert speed_order(fast, _rows([0.33 + i * 0.001 for i in range(8)]), 0.1, 0.1) == 0  # 10 % apart: within it


@pytest.mark.slow
def test_repeated_calls_count_the_caches_work_of_one_call(tiny_cache: Path, tmp_path: Path) -> None:
    run_dir = _render(tmp_path, "cache=fbcache", "steps=4", "timing.repeats=3")
    records, _ = read_samples(run_dir, json.loads((run_dir / "run.json").read_text())["cell_key"])
    counted = [r for r in records if r.steps_computed is not None]
    assert counted and all((r.steps_computed or 0) + (r.steps_reused or 0) == 4 for r in counted)


def test_the_rounds_least_cost_is_a_load_a_warm_up_and_six_calls_of_each_contender() -> None:
    """The sweep's round keeps to its share (issue 58): a group whose six rounds cannot fit is left to `assess retime`
    with the reason. A batched cell's call is its whole batch: six prompts at batch 8 are one 8-second call."""
    from types import SimpleNamespace

    from render.timing.sweep_round import least_cost_s

    def run(key: str, latencies: list[float], load: float) -> SimpleNamespace:
        samples = [SimpleNamespace(latency_s=x, warmup=i == 0, load_s=load if i == 0 else 0.0)
                   for i, x in enumerate(latencies)]
        return SimpleNamespace(cell_key=key, samples=samples)

    runs = [run("anchor", [3.0, 1.0, 1.0, 1.2], 2.0), run("batched", [8.0] * 6, 0.5)]
    assert least_cost_s(runs, ["anchor", "batched"]) == pytest.approx(7 * 1.0 + 2.0 + 7 * 8.0 + 0.5)
    assert least_cost_s(runs, ["anchor"]) == pytest.approx(9.0)
