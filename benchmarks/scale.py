"""`assess score` and `assess status` of an output root with many run folders (issue 29: 5,000 in under a
minute each on the 2-core machine).

    python benchmarks/scale.py [--runs 5000] [--samples 2] [--anchor-samples 200] [--keep DIR]

Builds an output root through the contract module (render.rundir): one anchor with `anchor-samples` prompts and
`runs - 1` cells in sweeps of 100, each cell `samples` finished 16x16 samples of some of the anchor's prompts, then times, each in its own process as a user runs them:
`assess score <root> --metrics psnr -q` (a first score, then a second with everything current) and
`assess status <root>`. Prints one line per figure.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from render import rundir
from render.rundir import cell_key_of

SIZE = 16


def _cell(steps: int) -> dict:
    return {"model": {"name": "tiny", "id": "/models/tiny", "revision": "0", "pipeline": "FluxPipeline",
                      "dtype": "float32"}, "device_kind": "cpu", "attention": "native", "cache": {"name": "none"},
            "scheduler": "default", "steps": steps, "guidance": 3.5, "height": SIZE, "width": SIZE}


ANCHOR = _cell(10_000)


def _png(seed: int) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 255, (SIZE, SIZE, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def write_run(path: Path, cell: dict, root: Path, numbers: list[int], is_anchor: bool) -> None:
    key = cell_key_of(cell)
    (path / rundir.IMAGES).mkdir(parents=True)
    prompts = {f"dev-{i:03d}": f"prompt {i}" for i in numbers}
    samples = len(prompts)
    overrides = [] if is_anchor else [f"steps={cell['steps']}"]
    rundir.atomic_write_json(path / rundir.RUN_JSON, {
        "schema": rundir.CONTRACT_VERSION, "cell_key": key, "cell": cell, "describe": f"tiny {cell['steps']} steps",
        "anchor": {"cell_key": cell_key_of(ANCHOR), "cell": ANCHOR, "overrides": [], "dir": "anchors/tiny/x"},
        "out_root": str(root), "is_anchor": is_anchor,
        "prompts": {"name": "dev", "split": "dev", "file": "dev.jsonl", "ids": list(prompts),
                    "sha": {i: rundir.text_hash(t) for i, t in prompts.items()}},
        "seeds": [0], "overrides": overrides, "config": {}, "versions": {}, "device": {"kind": "cpu"}, "git": {},
        "host": "bench", "pid": 1, "job": {"launcher": "inprocess"}, "started_at": "2026-11-30T10:00:00+00:00"})
    records = []
    for n, (prompt_id, text) in enumerate(prompts.items()):
        png = _png(numbers[n] if is_anchor else numbers[n] + cell["steps"])
        image = f"{rundir.IMAGES}/{rundir.image_name(prompt_id, 0)}"
        (path / image).write_bytes(png)
        records.append(rundir.SampleRecord(
            cell_key=key, prompt_id=prompt_id, prompt=text, seed=0, image=image, width=SIZE, height=SIZE,
            latency_s=0.1, warmup=n == 0, steps=cell["steps"], s_per_step=0.01, peak_mem_bytes=1, mem_kind="cpu-rss-hwm",
            load_s=1.0, reused_from=None, finished_at="2026-11-30T10:00:01+00:00", sha256=rundir.digest(png),
            bytes=len(png), prompt_sha=rundir.text_hash(text)).as_dict())
    rundir.append_records(path / rundir.SAMPLES, records)
    rundir.write_done(path, n_samples=samples, n_rendered=samples, n_reused=0, wall_s=1.0, gpu_s=0.2)


def build(root: Path, runs: int, samples: int, anchor_samples: int = 200) -> None:
    write_run(root / "anchors" / "tiny" / "x" / "a", ANCHOR, root, list(range(anchor_samples)), is_anchor=True)
    for n in range(runs - 1):
        sweep = root / "multirun" / f"sweep-{n // 100:03d}"
        if n % 100 == 0:
            sweep.mkdir(parents=True)
            (sweep / rundir.MULTIRUN_YAML).write_text("hydra: {}\n")
        numbers = sorted({(n * samples + i) % anchor_samples for i in range(samples)})
        write_run(sweep / f"{n % 100}_steps={n + 1}", _cell(n + 1), root, numbers, is_anchor=False)


def timed(*args: str) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "assess", *args], capture_output=True, text=True)
    return time.perf_counter() - start, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--anchor-samples", type=int, default=200)
    parser.add_argument("--keep", type=Path, default=None, help="build (or reuse) the output root here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = (args.keep or Path(scratch)) / "outputs"
        if not root.exists():
            start = time.perf_counter()
            build(root, args.runs, args.samples, args.anchor_samples)
            print(f"built {args.runs} run folders ({args.samples} samples each, the anchor {args.anchor_samples}) "
                  f"in {time.perf_counter() - start:.1f} s")
        db = root / "index.db"
        for label in ("score (first)", "score (all current)"):
            seconds, done = timed("score", str(root), "--db", str(db), "--metrics", "psnr", "-q")
            print(f"assess {label} of {args.runs} run folders: {seconds:.1f} s (exit {done.returncode}) "
                  f"{done.stdout.strip().splitlines()[0] if done.stdout.strip() else done.stderr.strip()[-300:]}")
        seconds, done = timed("status", str(root))
        print(f"assess status of {args.runs} run folders: {seconds:.1f} s (exit {done.returncode}, "
              f"{len(done.stdout.splitlines())} lines)")


if __name__ == "__main__":
    main()
