"""Index and scoring benchmarks, measured side by side in one run.

    python benchmarks/index.py [--scores 100000] [--cells 10000] [--images 1024]

Prints: ingest rate of sample scores through the real write path (goal: 100k in <= 5 s),
leaderboard query time at 10k cells (goal: <= 0.2 s), and PSNR+SSIM throughput on 32x32 images.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from assess.index import Index, ScoreRow, now_iso
from assess.metrics import SPECS, Outcome, SampleInput
from assess.metrics.fidelity import PSNRMetric, SSIMMetric

SAMPLE_METRICS = [SPECS[m] for m in ("psnr", "ssim", "lpips", "clip_score")]
SAMPLES_PER_CELL = 25


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
        {"cell_key": cell_key, "prompt_id": f"dev-{i:03d}", "seed": 0, "split": split, "run_path": run_path,
         "image": f"images/dev-{i:03d}__s0.png", "prompt": "a prompt", "width": 32, "height": 32,
         "latency_s": float(rng.uniform(0.5, 1.5)), "warmup": int(i == 0), "steps": 8, "s_per_step": 0.1,
         "peak_mem_bytes": 1 << 30, "mem_kind": "cuda-max-allocated", "load_s": 3.0, "reused_from": None,
         "finished_at": None, "problem": None}
        for i in range(SAMPLES_PER_CELL)
    ]


def bench_ingest(n_scores: int, folder: Path) -> tuple[float, int]:
    """Runs, samples and scores written cell by cell through Index (one transaction per cell)."""
    rng = np.random.default_rng(0)
    per_cell = SAMPLES_PER_CELL * len(SAMPLE_METRICS)
    n_cells = max(1, n_scores // per_cell)
    with Index.open(folder / "ingest.db") as index:
        start = time.perf_counter()
        for c in range(n_cells):
            key = f"cell{c:012d}"
            run = run_row(key)
            samples = sample_rows(key, run["path"], rng)
            scores = [ScoreRow(key, s["prompt_id"], 0, spec, Outcome.of(float(rng.uniform(0, 1))), "", "anchor")
                      for s in samples for spec in SAMPLE_METRICS]
            with index.write() as conn:
                index.upsert_run(conn, run)
                index.upsert_samples(conn, samples)
                index.write_scores(conn, scores)
                index.refresh_cell(conn, key)
        elapsed = time.perf_counter() - start
    return elapsed, n_cells * per_cell


def bench_leaderboard(n_cells: int, folder: Path) -> tuple[float, int]:
    """Median time of the leaderboard query on an index of n_cells cells (filled with bulk inserts)."""
    rng = np.random.default_rng(1)
    with Index.open(folder / "board.db") as index:
        with index.write() as conn:
            keys = ["anchor000000000"] + [f"cell{c:012d}" for c in range(n_cells - 1)]
            for i, key in enumerate(keys):
                index.upsert_run(conn, run_row(key, is_anchor=i == 0))
            conn.executemany(
                "INSERT INTO samples (cell_key, prompt_id, seed, split, run_path, image, warmup, latency_s) "
                "VALUES (?, ?, 0, 'dev', ?, 'x.png', 0, ?)",
                [(key, f"dev-{i:03d}", f"/outputs/multirun/x/{key}", float(rng.uniform(0.5, 1.5)))
                 for key in keys for i in range(SAMPLES_PER_CELL)])
            for key in keys:  # derives cell_scores (speed) and cell_summary, as scoring does
                index.refresh_cell(conn, key)
            conn.executemany(
                "UPDATE cell_summary SET psnr = ?, ssim = ?, clip_score = ? WHERE cell_key = ?",
                [(float(rng.uniform(20, 40)), float(rng.uniform(0.5, 1)), float(rng.uniform(20, 35)), key)
                 for key in keys])
        conn = index.conn
        conn.execute("ANALYZE")
        times = []
        for _ in range(5):
            start = time.perf_counter()
            rows = index.leaderboard("dev")
            times.append(time.perf_counter() - start)
        assert len(rows) == n_cells
    return statistics.median(times), n_cells


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scores", type=int, default=100_000)
    parser.add_argument("--cells", type=int, default=10_000)
    parser.add_argument("--images", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ingest_s, n = bench_ingest(args.scores, folder)
        print(f"ingest: {n} sample scores in {ingest_s:.2f} s ({n / ingest_s:,.0f}/s; goal <= 5 s for 100k: "
              f"{'ok' if ingest_s * 100_000 / n <= 5 else 'MISSED'})")
        board_s, cells = bench_leaderboard(args.cells, folder)
        print(f"leaderboard: {cells} cells in {board_s * 1000:.0f} ms (goal <= 200 ms: "
              f"{'ok' if board_s <= 0.2 else 'MISSED'})")
    rate = bench_fidelity(args.images)
    print(f"fidelity: PSNR+SSIM on 32x32, {rate:,.0f} images/s ({args.images} pairs)")


if __name__ == "__main__":
    main()
