"""`assess score` offline without HF_HUB_OFFLINE vs with it, measured side by side in one run.

    python benchmarks/score_offline.py [--repeats 3]

A 3-cell sweep of the tiny model (steps=4,8,12, its anchor included) is rendered once into a
temporary folder; then `assess score <sweep>` runs as whole processes into a fresh index each time,
alternating: (a) with no offline variable set, on a machine where the hub cannot be reached and
the default CLIP model is not cached, and (b) with HF_HUB_OFFLINE=1. Goal: (a) / (b) <= 1.2
(the first version spent about 23 s in hub retries on every call). Each figure is the median wall
time over --repeats.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def _env(offline: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE_VARS and k != "HYPERGRID_CLIP_MODEL"}
    return {**env, "HF_HUB_OFFLINE": "1"} if offline else env


def render_sweep(root: Path) -> Path:
    subprocess.run([sys.executable, "-m", "render", "-m", "model=tiny", "steps=4,8,12", "seed=42",
                    f"out_root={root / 'outputs'}"], cwd=root, env=_env(True), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    [sweep] = [p for p in (root / "outputs" / "multirun").glob("*/*") if p.is_dir()]
    return sweep


def score_wall(sweep: Path, db: Path, offline: bool) -> tuple[float, str]:
    db.unlink(missing_ok=True)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "assess", "score", str(sweep), "--db", str(db)], env=_env(offline),
                          check=True, capture_output=True, text=True)
    return time.perf_counter() - start, done.stdout + done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sweep = render_sweep(root)
        times: dict[bool, list[float]] = {False: [], True: []}
        outputs: dict[bool, str] = {}
        for _ in range(args.repeats):
            for offline in (False, True):
                seconds, outputs[offline] = score_wall(sweep, root / "index.db", offline)
                times[offline].append(seconds)
    plain, flagged = statistics.median(times[False]), statistics.median(times[True])
    clip = [line.strip() for line in outputs[False].splitlines() if line.strip().startswith("clip_score unavailable")]
    print(f"assess score, 3-cell tiny sweep + anchor, median of {args.repeats}:")
    print(f"  (a) hub unreachable, no HF_HUB_OFFLINE : {plain:6.2f} s   {[round(t, 2) for t in times[False]]}")
    print(f"  (b) HF_HUB_OFFLINE=1                   : {flagged:6.2f} s   {[round(t, 2) for t in times[True]]}")
    print(f"  ratio (a)/(b) = {plain / flagged:.2f}   (goal <= 1.2)")
    print(f"  (a) says: {clip[0] if clip else 'no clip_score line'}")
    print(f"  (a) printed 'Retry': {'Retry' in outputs[False]}")


if __name__ == "__main__":
    main()
