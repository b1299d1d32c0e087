"""Throughput per batch, side by side in one sweep, through the product's own commands (docs/axes.md: batch).

    OMP_NUM_THREADS=1 python benchmarks/batch.py [--model shapes] [--batches 1,2,4,8] [--prompts 16]

Renders `python -m render -m model=M batch=...` in a fresh folder (its side-by-side round times every batch a
call per round, against the anchor), scores it, and prints a Markdown table per batch: the call's latency, images/s
of one replica, GPU-s/image with their 95 % intervals (assess.report.throughput), the ratio of images/s to batch 1's, peak
memory, and each sample's drift against its batch-1 twin (assess.statistics.parity: largest pixel difference, lowest SSIM).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="shapes")
    parser.add_argument("--batches", default="1,2,4,8")
    parser.add_argument("--prompts", type=int, default=16, help="dev prompts (each batch renders them all)")
    parser.add_argument("--steps", type=int, default=None)
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        command = [sys.executable, "-m", "render", "-m", f"model={args.model}", f"batch={args.batches}", "prompts=dev",
                   f"prompts.limit={args.prompts}", *([f"steps={args.steps}"] if args.steps else [])]
        subprocess.run(command, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
        subprocess.run([sys.executable, "-m", "assess", "score", "outputs", "--metrics", "ssim", "-q"], cwd=cwd, env=env,
                       check=True, stdout=subprocess.DEVNULL)
        print(table(cwd / "outputs" / "index.db"))


def table(db: Path) -> str:
    from assess.index.database import Index
    from assess.report.throughput import cell_throughput

    with Index.open(db, create=False) as index:
        found = [(json.loads(r["cell"]), r["cell_key"]) for r in index.query("SELECT DISTINCT cell, cell_key FROM runs "
                                                                              "WHERE NOT is_anchor")]
        cells = {cell.get("batch", 1): key for cell, key in found if "parallel" not in cell}  # width 1: the batches
        figures = {b: cell_throughput(index, key) for b, key in sorted(cells.items())}
        drift = {b: index.parity(key) for b, key in cells.items() if b > 1}
    first = figures.get(1)
    base = first.images_per_s.value if first else None
    lines = ["| batch | latency s (a call) | images/s | × batch 1 | GPU-s/image | peak memory | drift vs batch 1 |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for batch, t in figures.items():
        if t is None:
            continue
        rows = drift.get(batch, [])
        levels = max((r["max_levels"] for r in rows if r["max_levels"] is not None), default=None)
        ssim = min((r["ssim"] for r in rows if r["ssim"] is not None), default=None)
        shown = "—" if batch == 1 else (f"≤ {levels} level(s), SSIM ≥ {ssim:.4f}" if levels is not None and ssim is not None
                                      else "not compared")
        ratio = f"{t.images_per_s.value / base:.2f}" if base else "n/a"
        memory = "n/a" if t.peak_mem_bytes is None else f"{t.peak_mem_bytes / 2**20:,.0f} MiB"
        lines.append(f"| {batch} | {t.latency.text()} | {t.images_per_s.text()} | {ratio} | {t.gpu_s_per_image.text()} "
                     f"| {memory} | {shown} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
