"""Index and scoring benchmarks, measured side by side in one run.

    python benchmarks/index.py [--scores 100000] [--cells 10000] [--images 1024] [--repeats 3]

Prints, for today's writer (assess.index.database.Index: sqlite-utils) and the baseline (benchmarks/index_baseline.py: the
hand-written SQL it replaced) on the same data, alternating which goes first in each repeat:
ingest of sample scores through the write path (goal: 100k in <= 5 s; sqlite-utils <= 1.1x the baseline) and the
leaderboard query at 10k cells (goal: <= 0.2 s; <= 1.1x the baseline); then PSNR+SSIM throughput on 32x32 images.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # index_baseline, next to this file

from index_baseline import BaselineIndex  # noqa: E402

from assess.index.database import Index, ScoreRow, now_iso  # noqa: E402
from assess.index.writer import KNOWN_SIGNATURE  # noqa: E402
from assess.metrics import SPECS, Outcome, SampleInput  # noqa: E402
from assess.metrics.fidelity import PSNRMetric, SSIMMetric  # noqa: E402

SAMPLE_METRICS = [SPECS[m] for m in ("psnr", "ssim", "lpips", "clip_score")]
SAMPLES_PER_CELL = 25
WRITERS: dict[str, type[Index]] = {"baseline (hand-written SQL)": BaselineIndex, "sqlite-utils (assess.index.database)": Index}
GOAL_RATIO = 1.1


def run_row(cell_key: str, split: str = "dev", is_anchor: bool = False) -> dict:
    return {
        "path": f"/outputs/multirun/x/{cell_key}", "sweep": "/outputs/multirun/x", "cell_key": cell_key,
        "anchor_cell_key": "anchor000000000", "is_anchor": int(is_anchor), "split": split, "prompts_name": split,
        "n_expected": SAMPLES_PER_CELL, "n_samples": SAMPLES_PER_CELL, "n_rendered": SAMPLES_PER_CELL, "n_reused": 0,
        "status": "done", "cell": "{}", "overrides": json.dumps([f"steps={cell_key[-2:]}"]), "anchor_overrides": "[]",
        "prompt_ids": "[]", "seeds": "[0]", "gpu_s": 10.0, "started_at": "2026-11-30T10:00:00+00:00",
        "indexed_at": now_iso(),
    }


def sample_rows(cell_key: str, run_path: str, rng: np.random.Generator, split: str = "dev") -> list[dict]:
    return [
        {"cell_key": cell_key, "prompt_sha": f"sha-{i:03d}", "prompt_id": f"dev-{i:03d}", "seed": 0, "split": split,
         "run_path": run_path, "image": f"images/dev-{i:03d}__s0.png", "prompt": "a prompt", "width": 32, "height": 32,
         "latency_s": float(rng.uniform(0.5, 1.5)), "warmup": int(i == 0), "steps": 8, "s_per_step": 0.1,
         "peak_mem_bytes": 1 << 30, "mem_kind": "cuda-max-allocated", "load_s": 3.0, "reused_from": None,
         "finished_at": None, "problem": None}
        for i in range(SAMPLES_PER_CELL)
    ]


Cell = tuple[str, dict, list[dict], list[ScoreRow]]


def ingest_data(n_scores: int) -> list[Cell]:
    """Every cell's run, samples and scores, made once so both writers get the same data (and its making is not timed)."""
    rng = np.random.default_rng(0)
    cells = []
    for c in range(max(1, n_scores // (SAMPLES_PER_CELL * len(SAMPLE_METRICS)))):
        key = f"cell{c:012d}"
        run = run_row(key)
        samples = sample_rows(key, run["path"], rng)
        scores = [ScoreRow(key, s["prompt_sha"], s["prompt_id"], 0, spec, Outcome.of(float(rng.uniform(0, 1))), "",
                           "anchor000000000") for s in samples for spec in SAMPLE_METRICS]
        cells.append((key, run, samples, scores))
    return cells


def write_cell(index: Index, cell: Cell) -> float:
    """One cell's run, samples and scores written as `assess score` does (one transaction); its seconds."""
    key, run, samples, scores = cell
    start = time.perf_counter()
    with index.write() as conn:
        index.upsert_run(conn, run)
        index.upsert_samples(conn, samples)
        index.write_scores(conn, scores)
        index.refresh_cell(conn, key)
    return time.perf_counter() - start


def bench_ingest(cells: list[Cell], folder: Path, repeat: int) -> dict[str, float]:
    """Each writer ingests every cell into its own new index, interleaved cell by cell (which writer goes first
    alternates), so a burst of load on a shared machine falls on both: per writer, the seconds summed over cells."""
    indexes = {name: writer.open(folder / f"ingest-{repeat}-{i}.db") for i, (name, writer) in enumerate(WRITERS.items())}
    totals = dict.fromkeys(WRITERS, 0.0)
    try:
        for c, cell in enumerate(cells):
            for name in (list(WRITERS) if (c + repeat) % 2 == 0 else list(WRITERS)[::-1]):
                totals[name] += write_cell(indexes[name], cell)
    finally:
        for index in indexes.values():
            index.close()
    return totals


def fill_board(writer: type[Index], n_cells: int, path: Path) -> None:
    """An index of n_cells cells (one anchor) with samples, speed and main metrics, written by the writer."""
    rng = np.random.default_rng(1)
    with writer.open(path) as index, index.write() as conn:
        keys = ["anchor000000000"] + [f"cell{c:012d}" for c in range(n_cells - 1)]
        for i, key in enumerate(keys):
            run = run_row(key, is_anchor=i == 0)
            index.upsert_run(conn, run)
            index.upsert_samples(conn, sample_rows(key, run["path"], rng))
        for key in keys:  # derives cell_scores (speed) and cell_summary, as scoring does
            index.refresh_cell(conn, key)
        conn.executemany(  # the benchmark's own fill of the sample metrics' columns (no images to score here)
            "UPDATE cell_summary SET psnr = ?, ssim = ?, clip_score = ? WHERE cell_key = ?",
            [(float(rng.uniform(20, 40)), float(rng.uniform(0.5, 1)), float(rng.uniform(20, 35)), key)
             for key in keys])
        conn.execute("ANALYZE")


def time_board(path: Path, n_cells: int) -> float:
    with Index.open(path) as index:
        start = time.perf_counter()
        rows = index.leaderboard("dev")
        elapsed = time.perf_counter() - start
    assert len(rows) == n_cells, (len(rows), n_cells)
    return elapsed


def report(label: str, times: dict[str, list[float]], unit: str = "s") -> dict[str, float]:
    """Every writer's times, their medians and the ratio sqlite-utils / baseline against the goal."""
    scale = 1000 if unit == "ms" else 1
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        print(f"  {label} {name:30s} median {medians[name] * scale:8.3f} {unit}   each: "
              f"{' '.join(f'{x * scale:.3f}' for x in t)}")
    base, new = medians.values()
    ratio = new / base
    each = [n / b for b, n in zip(*times.values())]  # the same repeat's two writers: how far the ratio wanders
    print(f"  {label} ratio sqlite-utils / baseline: {ratio:.3f}x (goal <= {GOAL_RATIO}x: "
          f"{'ok' if ratio <= GOAL_RATIO else 'MISSED'}); repeat by repeat {min(each):.3f}x to {max(each):.3f}x")
    return medians


def bench_fidelity(n_images: int) -> float:
    """PSNR + SSIM images per second on 32x32 RGB pairs."""
    rng = np.random.default_rng(2)
    items = []
    for i in range(n_images):
        ref = rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
        img = np.clip(ref.astype(int) + rng.integers(-5, 6, size=ref.shape), 0, 255).astype(np.uint8)
        items.append(SampleInput(f"p{i}", 0, img, None, reference=ref))
    psnr, ssim = PSNRMetric(), SSIMMetric()
    ssim.score(items[:8])  # import and warm up outside the timing
    start = time.perf_counter()
    psnr.score(items)
    ssim.score(items)
    return n_images / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scores", type=int, default=100_000)
    parser.add_argument("--cells", type=int, default=10_000)
    parser.add_argument("--images", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3, help="ingests per writer (queries: 5x as many)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cells = ingest_data(args.scores)
        n = len(cells) * SAMPLES_PER_CELL * len(SAMPLE_METRICS)
        print(f"ingest: {n} sample scores, {len(cells)} cells, one transaction per cell, both writers interleaved")
        print(f"  sqlite-utils {version('sqlite-utils')}: statement cache of assess/index/writer.py "
              f"{'active' if KNOWN_SIGNATURE else 'INACTIVE (this release builds its inserts differently)'}")
        for i, writer in enumerate(WRITERS.values()):  # imports and first-call costs (scipy's bootstrap) untimed
            with writer.open(folder / f"warm-{i}.db") as index:
                write_cell(index, cells[0])
        times: dict[str, list[float]] = {name: [] for name in WRITERS}
        for r in range(args.repeats):
            for name, seconds in bench_ingest(cells, folder, r).items():
                times[name].append(seconds)
        medians = report("ingest", times)
        new_s = medians[list(WRITERS)[1]]
        print(f"  ingest rate {n / new_s:,.0f}/s (goal <= 5 s for 100k: {'ok' if new_s * 100_000 / n <= 5 else 'MISSED'})")
        print(f"leaderboard: {args.cells} cells, each writer's own index, the same query")
        boards = {name: folder / f"board-{i}.db" for i, name in enumerate(WRITERS)}
        for name, path in boards.items():
            fill_board(WRITERS[name], args.cells, path)
        times = {name: [] for name in WRITERS}
        for r in range(args.repeats * 5):  # alternating which goes first
            for name in (list(WRITERS) if r % 2 == 0 else list(WRITERS)[::-1]):
                times[name].append(time_board(boards[name], args.cells))
        medians = report("leaderboard", times, unit="ms")
        new_s = medians[list(WRITERS)[1]]
        print(f"  leaderboard {new_s * 1000:.0f} ms (goal <= 200 ms: {'ok' if new_s <= 0.2 else 'MISSED'})")
    rate = bench_fidelity(args.images)
    print(f"fidelity: PSNR+SSIM on 32x32, {rate:,.0f} images/s ({args.images} pairs)")


if __name__ == "__main__":
    main()
