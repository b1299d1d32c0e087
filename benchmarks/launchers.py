"""The Ray launcher's cost per job against the gpus launcher's, side by side in one run (docs/launchers.md).

    OMP_NUM_THREADS=1 python benchmarks/launchers.py [--repeats 3] [--address auto]

Needs a Ray cluster with 2 GPUs declared (.ci/ray/up.sh). Each repeat runs the same 2-cell sweep of the tiny model
(2 steps, 1 prompt, no anchor: almost nothing to render, so the wall time is the launcher's) through
`hydra/launcher=gpus hydra.launcher.gpus=[0,1]` and `hydra/launcher=ray`, alternately, each in a fresh folder;
it prints each launcher's median wall time and the difference per job (2 jobs a sweep).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

SWEEP = ["-m", "model=tiny", "steps=2,3", "prompts.limit=1", "render_anchor=false", "timing.side_by_side=false"]
JOBS = 2


def wall(launcher: list[str]) -> float:
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "render", *SWEEP, *launcher], cwd=folder, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--address", default="auto")
    args = parser.parse_args()
    launchers = {"gpus": ["hydra/launcher=gpus", "hydra.launcher.gpus=[0,1]"],
                 "ray": ["hydra/launcher=ray", f"hydra.launcher.address={args.address}"]}
    times: dict[str, list[float]] = {name: [] for name in launchers}
    for _ in range(args.repeats):
        for name, options in launchers.items():
            times[name].append(wall(options))
    gpus, ray = statistics.median(times["gpus"]), statistics.median(times["ray"])
    for name, values in times.items():
        print(f"{name}: median {statistics.median(values):.1f} s ({', '.join(f'{v:.1f}' for v in values)})")
    print(f"ray - gpus: {ray - gpus:+.1f} s a sweep of {JOBS} jobs, {(ray - gpus) / JOBS:+.1f} s a job; ratio {ray / gpus:.2f}")


if __name__ == "__main__":
    main()
