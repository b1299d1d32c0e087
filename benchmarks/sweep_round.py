"""What the side-by-side round a sweep ends with costs (docs/timing.md), measured side by side in one run.

    python benchmarks/sweep_round.py [--repeats 3] [-- OVERRIDES...]

The README's first sweep (default: `python -m render -m steps=4,8,16 cache=none,fbcache`, the shapes model) is run
by the real CLI into fresh output roots, alternately with `timing.side_by_side=false` (the cells one after another)
and with the default timing (its cells rendered in interleaved rounds with their anchor, render.timing.interleave),
`--repeats` times each (alternating, so a trend of the machine falls on both alike). It prints each pair's wall
times, the round's own seconds and share of the sweep as its last lines state them, and the median ratio of the
whole command's wall time with the round to without it.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

README_SWEEP = ["-m", "steps=4,8,16", "cache=none,fbcache"]


def run(overrides: list[str], off: bool) -> tuple[float, str]:
    """(wall seconds of the whole command, its side-by-side line) in a fresh folder."""
    with tempfile.TemporaryDirectory() as cwd:
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        args = [sys.executable, "-m", "render", *overrides, *(["timing.side_by_side=false"] if off else [])]
        start = time.perf_counter()
        done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("side by side:")), "")
        return wall, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("overrides", nargs="*", default=README_SWEEP)
    args = parser.parse_args()
    ratios = []
    for repeat in range(args.repeats):
        without, _ = run(args.overrides, off=True)
        with_round, line = run(args.overrides, off=False)
        spent = re.search(r"([\d.]+) s, (\d+)% of the sweep's (\d+) s", line)
        ratios.append(with_round / without)
        print(f"repeat {repeat + 1}: without the round {without:.1f} s, with it {with_round:.1f} s "
              f"(+{with_round - without:.1f} s, x{with_round / without:.2f}); its line: "
              + (f"{spent.group(1)} s, {spent.group(2)} % of the sweep's {spent.group(3)} s" if spent else line))
    print(f"median: the command takes x{statistics.median(ratios):.2f} with the round "
          f"({len(ratios)} pairs, {' '.join(args.overrides)})")


if __name__ == "__main__":
    main()
