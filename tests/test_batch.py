"""The batch axis (issue 46): `batch=N` renders a cell's samples N prompts per pipeline call, each with its own
seeded generator. The batch is part of the cell (from 2 on: older keys stay), its single-call twin (batch 1) is what
its per-sample drift is measured against, and skip-if-done stays per sample."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from render import rundir
from render.cell import build_job, twin_job
from render.errors import ConfigError
from render.rundir.records import twin_key
from tests.conftest import compose_cfg, run_render


def test_the_batch_enters_the_key_from_2_on_and_its_twin_is_the_batch_1_cell() -> None:
    one = build_job(compose_cfg("model=tiny", "steps=4"))
    assert build_job(compose_cfg("model=tiny", "steps=4", "batch=1")).cell.key == one.cell.key  # older keys stay
    four = build_job(compose_cfg("model=tiny", "steps=4", "batch=4"))
    assert four.cell.key != one.cell.key and four.cell.canonical()["batch"] == 4
    assert four.cell.describe().endswith("batch 4")
    twin = twin_job(four)
    assert twin is not None and twin.cell.key == one.cell.key and not twin.render_anchor
    assert twin_key(four.cell.canonical()) == one.cell.key
    assert twin_job(one) is None
    assert four.anchor.key == one.anchor.key  # the anchor renders one sample per call


@pytest.mark.parametrize("overrides,says", [
    (["batch=0"], "batch=0: samples per pipeline call, an integer from 1 to 64"),
    (["batch=65"], "batch=65: samples per pipeline call, an integer from 1 to 64"),
    (["batch=2", "parallel=ulysses"], "a parallel cell splits one sample's sequence over its GPUs"),
    (["batch=2", "cache=fbcache"], "batch=2 with cache=fbcache: it skips a step when the first block's residual"),
    (["batch=4", "cache=seacache"], "batch=4 with cache=seacache: it skips a step by the whole batch's spectral"),
])
def test_a_batch_a_cell_cannot_take_is_refused_saying_why(overrides: list[str], says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        build_job(compose_cfg("model=tiny", "steps=4", *overrides))
    assert says in str(refused.value), str(refused.value)


def test_a_batched_samples_device_time_is_its_share_of_the_call() -> None:
    record = rundir.SampleRecord(cell_key="k", prompt_id="p", seed=0, prompt="a", image="images/p__s0.png", width=32,
                                 height=32, latency_s=0.4, warmup=False, steps=4, s_per_step=0.1, peak_mem_bytes=1,
                                 mem_kind="cpu-rss-hwm", load_s=0.0, reused_from=None, finished_at=None, batch=4,
                                 share_s=0.1)
    assert record.device_s == pytest.approx(0.1)
    assert rundir.parse_sample(record.as_dict(), "k") == record


# -- one batched sweep, rendered once for the module ----------------------------------------------------------------

SWEEP = ("-m", "model=tiny", "batch=1,2,4", "steps=4", "prompts.limit=6")


@pytest.fixture(scope="module")
def swept(tiny_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The issue's sweep, with the side-by-side round that times the batched cells (a call per round, its images'
    latency), then scored."""
    cwd = tmp_path_factory.mktemp("batched")
    done = run_render(*SWEEP, cwd=cwd, timing_round=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    # the sweep's round keeps to its share and leaves the batched cells (six rounds of whole-batch calls) to retime,
    # as its last line says: the user's next command
    (sweep,) = (cwd / "outputs" / "multirun").glob("*/*")
    retimed = subprocess.run([sys.executable, "-m", "assess", "retime", str(sweep), "--rounds", "6", "--db",
                              str(cwd / "index.db")], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert retimed.returncode == 0, retimed.stdout[-3000:] + retimed.stderr[-3000:]
    wide = run_render("model=tiny", "steps=4", "prompts.limit=6", "parallel=ulysses", cwd=cwd, timeout=600)  # for the fleet
    assert wide.returncode == 0, wide.stderr[-3000:]
    scored = subprocess.run([sys.executable, "-m", "assess", "score", str(cwd / "outputs"), "--db", str(cwd / "index.db"),
                             "--metrics", "psnr,ssim"], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert scored.returncode == 0, scored.stderr[-3000:]
    return cwd


def records_by_cell(root: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for path in (root / "outputs" / "multirun").rglob("samples.jsonl"):
        cell = json.loads((path.parent / "run.json").read_text())["cell"]
        out.setdefault(str(cell.get("batch", 1)) if not json.loads((path.parent / "run.json").read_text())["is_anchor"]
                       else "anchor", []).extend(json.loads(line) for line in path.read_text().splitlines())
    return out


@pytest.mark.slow
def test_a_batched_sweep_renders_every_sample_once_in_calls_of_its_batch(swept: Path) -> None:
    rendered = [(r["cell_key"], r["prompt_sha"], r["seed"]) for path in (swept / "outputs").rglob("samples.jsonl")
                for r in map(json.loads, path.read_text().splitlines()) if r["reused_from"] is None]
    assert not [k for k, n in Counter(rendered).items() if n > 1], "a sample was rendered twice"
    cells = records_by_cell(swept)
    four = [r for r in cells["4"] if r["reused_from"] is None]
    assert len(four) == 6 and Counter(r["batch"] for r in four) == {4: 4, 2: 2}, four  # 6 samples: a call of 4, then 2
    for r in four:
        assert r["share_s"] == pytest.approx(r["latency_s"] / r["batch"], abs=2e-6)
    assert all(r["batch"] is None for r in cells["1"]), "a batch-1 cell's records are as before"
    assert [r["warmup"] for r in four] == [True] * 4 + [False] * 2  # the first call is the warm-up, all of it
    # each sample's own generator: its pixels are the batch-1 sample's (here to the byte; the index has the drift)
    single = {(r["prompt_sha"], r["seed"]): r["sha256"] for r in cells["1"]}
    assert all(single[(r["prompt_sha"], r["seed"])] == r["sha256"] for r in four)


@pytest.mark.slow
def test_the_index_holds_each_batched_samples_call_and_its_drift_against_batch_1(swept: Path) -> None:
    from assess.index.database import Index

    with Index.open(swept / "index.db") as index:
        batches = index.query("SELECT batch, COUNT(*) AS n FROM samples WHERE batch IS NOT NULL GROUP BY batch")
        cells = [(json.loads(r["cell"]), r["cell_key"]) for r in index.query("SELECT cell, cell_key FROM runs "
                                                                              "WHERE NOT is_anchor")]
        keys = {cell.get("batch"): key for cell, key in cells if "parallel" not in cell}
        drift = {key: index.parity(key) for b, key in keys.items() if b}
    assert {r["batch"]: r["n"] for r in batches} == {2: 6 + 2, 4: 4}
    for key, rows in drift.items():
        assert len(rows) == 6 and all(r["twin_cell_key"] == keys[None] for r in rows), rows
        assert all(r["max_levels"] is not None and r["max_levels"] <= 2 for r in rows), rows


@pytest.mark.slow
def test_the_side_by_side_round_times_a_batched_cell_a_call_at_a_time(swept: Path) -> None:
    """The batched contenders are timed a full call per round (by `assess retime`, the sweep's round leaving them when
    their rounds pass its share): every image of a call waits the call."""
    sessions = [json.loads(line) for path in (swept / "outputs").rglob("timings.jsonl") for line in path.read_text().splitlines()]
    keys = {r["cell_key"]: b for b, rs in records_by_cell(swept).items() if b != "anchor" for r in rs}
    timed = {keys[c["cell_key"]] for s in sessions for c in s["contenders"] if c["cell_key"] in keys}
    assert {"2", "4"} <= timed, timed


@pytest.mark.slow
def test_a_killed_batched_cell_resumes_with_no_sample_rendered_twice(tiny_cache: Path, tmp_path: Path) -> None:
    """Killed (SIGKILL) after its first call's records: the next launch renders only the samples still missing, in
    calls of its batch, and links nothing it should render (each sample once in the cell's folder)."""
    args = ["model=tiny", "batch=4", "steps=120", "prompts=dev", "prompts.limit=8", "render_anchor=false",
            "hydra.run.dir=outputs/runs/batched"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([sys.executable, "-m", "render", *args], cwd=tmp_path, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    samples = tmp_path / "outputs" / "runs" / "batched" / "samples.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (samples.is_file() and samples.read_text().count("\n") >= 4):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    before = samples.read_text().count("\n")
    assert 4 <= before < 8, f"killed after {before} samples: the test needs it mid-cell"
    again = run_render(*args, cwd=tmp_path, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(records) == 8 and len({(r["prompt_sha"], r["seed"]) for r in records}) == 8
    assert all(r["reused_from"] is None and r["batch"] for r in records)


@pytest.mark.slow
def test_a_batch_out_of_memory_fails_its_cell_as_oom_and_names_the_batch(tiny_cache: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The OOM path: a batched call that runs out of device memory ends its cell as `oom` (FAILED.json naming the
    batch and a smaller one to try), not the sweep: the same process renders the next cell."""
    import torch

    from render.run import runner
    from render.run.loader import PIPELINES
    from render.rundir import SampleStore

    def out_of_memory(*args: object, **kwargs: object) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(runner, "timed_batch", out_of_memory)
    out = tmp_path / "outputs"
    results = []
    for batch in (4, 1):
        job = build_job(compose_cfg("model=tiny", "steps=2", "prompts.limit=4", "render_anchor=false", f"batch={batch}",
                                    out_root=out))
        ran = runner.run_job(job, out / "runs" / f"b{batch}", store=SampleStore(out), pipelines=PIPELINES,
                             overrides=[f"batch={batch}"])  # (with the batch-4 cell, its single-call twin)
        results.append(next(r for r in ran if r.cell_key == job.cell.key))
    failed = json.loads((results[0].run_dir / "FAILED.json").read_text())
    assert failed["category"] == "oom" and "batch=4 did not fit" in failed["message"] and "batch=2" in failed["message"]
    assert failed["sample"]["batch"] == [["smoke-000", 0], ["smoke-001", 0], ["smoke-002", 0], ["smoke-003", 0]]
    assert results[1].status == "done" and results[1].n_rendered + results[1].n_reused == 4  # (its twin rendered them)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["tiny-flux2", "tiny-qwen-image", "tiny-z-image", "tiny-wan"])
def test_every_familys_twin_renders_a_batch_as_its_single_calls(model: str, twin_cache: Path, tmp_path: Path) -> None:
    """What each family takes: its pipeline renders a batch of prompts, one generator each, and every sample is its
    single call's within the parity band (the shapes and FLUX.1 twins: the module sweep above)."""
    from assess.statistics.parity import drift
    from assess.scoring.ingest import read_image  # a clip's first frame (the Wan twin's are byte-equal here)

    done = run_render("-m", f"model={model}", "batch=1,2", "prompts.limit=2", "render_anchor=false", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    images: dict[int, dict] = {}
    for path in (tmp_path / "outputs").rglob("samples.jsonl"):
        batch = json.loads((path.parent / "run.json").read_text())["cell"].get("batch", 1)
        for r in map(json.loads, path.read_text().splitlines()):
            images.setdefault(batch, {})[(r["prompt_sha"], r["seed"])] = path.parent / r["image"]
    assert len(images[2]) == 2 and images[2].keys() == images[1].keys()
    for sample, image in images[2].items():
        levels, ssim, _ = drift(read_image(image), read_image(images[1][sample]))
        assert levels <= 2 and ssim is not None and ssim >= 0.999, (model, sample, levels, ssim)


@pytest.mark.slow
def test_the_report_shows_images_per_second_per_batch_side_by_side(swept: Path) -> None:
    from assess.index.database import Index
    from assess.report.write import sweep_cells, write_report
    from assess.report.throughput import throughput_rows

    (sweep,) = (swept / "outputs" / "multirun").glob("*/*")
    page = write_report([sweep], swept / "index.db").read_text()
    assert 'id="throughput-table"' in page and "images/s" in page and "GPU-s/image" in page
    with Index.open(swept / "index.db") as index:
        views, _ = sweep_cells(index, [sweep])
        rows = throughput_rows(index, views)
    batches = {r["batch"] for r in rows}
    assert batches == {1, 2, 4} and sum(r["best"] for r in rows) == 1, rows
    order = [float(r["gpu_s_per_image"].split()[0]) for r in rows]
    assert order == sorted(order)  # the most images per GPU-second first
    for r in rows:
        latency, per_image = float(r["latency"].split()[0]), float(r["gpu_s_per_image"].split()[0])
        assert per_image == pytest.approx(latency * r["width"] / r["batch"], rel=1e-2), r  # (3 digits shown)


@pytest.mark.slow
def test_assess_fleet_answers_replicas_or_one_cell_over_n_gpus(swept: Path) -> None:
    """The fleet question on a sweep with batched cells and a parallel one: every candidate is arranged on the fleet
    (a width-2 cell twice on 4 GPUs, a width-1 cell four times), the two answers are the extremes of the figures, and
    the line says which to pick for which goal."""
    from assess.report.throughput import cell_throughput
    from assess.index.database import Index

    (sweep,) = (swept / "outputs" / "multirun").glob("*/*")
    (wide,) = (swept / "outputs" / "runs").glob("*/*")
    ran = subprocess.run([sys.executable, "-m", "assess", "fleet", str(sweep), str(wide), "--gpus", "4", "--json",
                          "--db", str(swept / "index.db")], cwd=swept, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    answer = json.loads(ran.stdout)
    by_width = {(c["width"], c["batch"]): c for c in answer["candidates"]}
    assert {(2, 1), (1, 1), (1, 2), (1, 4)} <= set(by_width), by_width
    assert by_width[(2, 1)]["replicas"] == 2 and by_width[(1, 4)]["replicas"] == 4
    with Index.open(swept / "index.db") as index:
        one = cell_throughput(index, by_width[(1, 4)]["cell_key"])
    assert one is not None and by_width[(1, 4)]["images_per_s"]["value"] == pytest.approx(4 * one.images_per_s.value)
    assert answer["lowest_latency"]["latency_s"]["value"] == min(c["latency_s"]["value"] for c in answer["candidates"])
    assert answer["highest_throughput"]["images_per_s"]["value"] == max(c["images_per_s"]["value"]
                                                                       for c in answer["candidates"])
    text = subprocess.run([sys.executable, "-m", "assess", "fleet", str(sweep), str(wide), "--gpus", "4",
                           "--db", str(swept / "index.db")], cwd=swept, capture_output=True, text=True, timeout=300)
    assert "lowest latency per image:" in text.stdout and "highest throughput:" in text.stdout
    assert "pick:" in text.stdout, text.stdout
    refused = subprocess.run([sys.executable, "-m", "assess", "fleet", str(sweep), "--gpus", "0", "--db",
                              str(swept / "index.db")], cwd=swept, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "--gpus" in refused.stderr and "0" in refused.stderr, refused.stderr


@pytest.mark.slow
def test_the_batch_benchmarks_table_reads_the_sweep(swept: Path) -> None:
    """benchmarks/batch.py's table (docs/axes.md's figures) on the module's sweep: a row per batch, batch 1 the
    ratio's base, each batched row with its drift against batch 1."""
    from tests.conftest import load_benchmark

    table = load_benchmark("batch").table(swept / "index.db").splitlines()
    rows = {line.split("|")[1].strip(): line for line in table[2:]}
    assert list(rows) == ["1", "2", "4"], table
    assert "| 1.00 |" in rows["1"] and "level(s), SSIM" in rows["2"] and "level(s), SSIM" in rows["4"]


@pytest.mark.slow
def test_one_cost_per_image_on_every_screen_of_a_batched_sweep(swept: Path) -> None:
    """One figure, one computation (assess.statistics.cost): a batched cell's GPU-s per image and cost per 1,000 images
    read the same in the verdict table (and so the answer line), the report's throughput table and `assess fleet`.
    They disagreed: the answer gave a batch-4 cell 0.0729 GPU-h per 1,000 images, the throughput table 0.143."""
    from assess.index.database import Index
    from assess.report.fleet import fleet
    from assess.report.throughput import throughput_rows
    from assess.report.write import sweep_cells, sweep_table

    (sweep,) = (swept / "outputs" / "multirun").glob("*/*")
    table = sweep_table([sweep], swept / "index.db")
    assert table is not None
    verdict = {r["cell_key"]: r for r in table["rows"] if not r["is_anchor"]}
    with Index.open(swept / "index.db") as index:
        views, _ = sweep_cells(index, [sweep])
        throughput = {r["cell_key"]: r for r in throughput_rows(index, views)}
    arranged = {c.cell_key: c for c in fleet([sweep], swept / "index.db", 1).candidates}
    batched = [k for k, r in verdict.items() if r["batch"] > 1]
    assert len(batched) == 2, verdict
    for key, r in verdict.items():
        assert r["gpu_s_image"] is not None, r
        assert r["cost"] == throughput[key]["cost"], (r["label"], r["cost"], throughput[key]["cost"])
        assert float(throughput[key]["gpu_s_per_image"].split()[0]) == pytest.approx(r["gpu_s_image"], rel=1e-2)
        if key in arranged:
            assert arranged[key].gpu_s_per_image.value == pytest.approx(r["gpu_s_image"], rel=1e-9), r["label"]
