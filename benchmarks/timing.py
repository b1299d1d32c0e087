"""Speed verdicts under noise, measured side by side in one run (docs/timing.md).

    python benchmarks/timing.py [--model shapes] [--steps 4,8,16] [--caches none,fbcache] [--prompts 6]

The same sweep is rendered twice into two out_roots, by the real `python -m render -m ...`: once on the machine
as it is ("quiet"), once while a child process started here burns CPU at random intervals ("noisy"; bounded:
it stops itself after --burn-s seconds at the latest and is killed when the render ends). Then, for every pair of
cells:

- today's point estimate: the median warm latency of each cell; the pair "agrees" when both runs put the two
  cells in the same order;
- the new figures (assess.noise, assess.stats.paired_speedup): each latency per its job's reference workload, the
  two-sample interval of the ratio widened by the reference's drift, the noisy flag. In the noisy run a pair is
  either ranked (the interval excludes 1, neither cell is flagged noisy, their images differ) and then agrees or
  not with the quiet run's point order, or flagged "within noise". Goal: >= 95 % of pairs agree or are flagged.

Byte-identical cells (every shared sample has the same image hash: the same work, e.g. a cache that never
engaged) are never ranked apart by the new rule; the benchmark counts how often today's point estimate does.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assess.noise import noise  # noqa: E402
from assess.stats import speed_order  # noqa: E402
from render.rundir import find_run_dirs, load_run  # noqa: E402

BURNER = '''
import os, random, sys, time
random.seed(int(sys.argv[2]))
stop = time.monotonic() + float(sys.argv[1])
while time.monotonic() < stop:
    end = time.monotonic() + random.uniform(0.3, 2.0)  # busy
    while time.monotonic() < end:
        sum(i * i for i in range(2000))
    time.sleep(random.uniform(0.3, 2.0))  # idle
'''


@dataclass
class CellRun:
    label: str
    warm: list  # SampleRecords, warm, rendered here
    drift: float
    hashes: dict  # (prompt text id, seed) -> image sha256

    @property
    def point(self) -> float:
        latencies = sorted(r.latency_s for r in self.warm)
        return latencies[len(latencies) // 2]


def render(out_root: Path, args: argparse.Namespace) -> float:
    cmd = [sys.executable, "-m", "render", "-m", f"model={args.model}", f"steps={args.steps}", f"cache={args.caches}",
           "prompts=dev", f"prompts.limit={args.prompts}", f"timing.repeats={args.repeats}", "render_anchor=false",
           f"out_root={out_root}"]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=out_root.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def cells_of(out_root: Path) -> dict[str, CellRun]:
    cells = {}
    for folder in find_run_dirs(out_root):
        run = load_run(folder)
        done = (run.terminal.data if run.terminal else {}) or {}
        warm = [s for s in run.samples if not s.warmup and not s.reused_from and s.latency_s]
        cells[run.cell_key] = CellRun(run.describe, warm, float((done.get("timing") or {}).get("drift") or 0.0),
                                      {(s.text_id, s.seed): s.sha256 for s in run.samples})
    return cells


def identical(a: CellRun, b: CellRun) -> bool:
    shared = set(a.hashes) & set(b.hashes)
    return bool(shared) and all(a.hashes[k] == b.hashes[k] for k in shared)


def new_order(a: CellRun, b: CellRun) -> int:
    """-1: a is faster beyond the noise, 1: b is, 0: within noise (or the same work): assess.stats.speed_order."""
    return speed_order(a.warm, b.warm, a.drift, b.drift, same_work=identical(a, b))


def point_order(a: CellRun, b: CellRun) -> int:
    return -1 if a.point < b.point else 1 if a.point > b.point else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="shapes")
    parser.add_argument("--steps", default="4,8,16")
    parser.add_argument("--caches", default="none,fbcache")
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--burn-s", type=float, default=900.0, help="the burner's own limit (it is also killed at the end)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hg-timing-") as tmp:
        quiet_root, noisy_root = Path(tmp) / "quiet", Path(tmp) / "noisy"
        quiet_root.mkdir(), noisy_root.mkdir()
        quiet_s = render(quiet_root, args)
        burner = subprocess.Popen([sys.executable, "-c", BURNER, str(args.burn_s), str(args.seed)])
        try:
            noisy_s = render(noisy_root, args)
        finally:
            burner.kill()
            burner.wait()
        quiet, noisy = cells_of(quiet_root), cells_of(noisy_root)
    keys = sorted(set(quiet) & set(noisy))
    pairs = list(itertools.combinations(keys, 2))
    old_agree = new_agree = flagged = new_wrong = same_work = old_apart = 0
    for x, y in pairs:
        truth = point_order(quiet[x], quiet[y])
        old_agree += point_order(noisy[x], noisy[y]) == truth
        verdict = new_order(noisy[x], noisy[y])
        flagged += verdict == 0
        new_agree += verdict != 0 and verdict == truth
        new_wrong += verdict != 0 and verdict != truth
        if identical(noisy[x], noisy[y]):
            same_work += 1
            old_apart += point_order(noisy[x], noisy[y]) != 0
    n = len(pairs)
    quiet_ranked = sum(new_order(quiet[x], quiet[y]) != 0 for x, y in pairs)  # the rule's resolution without load
    print(f"{len(keys)} cells ({args.model}, steps {args.steps}, caches {args.caches}, {args.prompts} prompts, "
          f"repeats {args.repeats}); {n} pairs; renders: quiet {quiet_s:.0f} s, noisy {noisy_s:.0f} s; "
          f"cpus {os.cpu_count()}")
    print(f"{'cell':<58} {'quiet s':>8} {'noisy s':>8} {'noise (noisy run)':>18}")
    for key in keys:
        figure = noise(noisy[key].warm, [noisy[key].drift])
        print(f"{quiet[key].label[:58]:<58} {quiet[key].point:>8.4f} {noisy[key].point:>8.4f} "
              f"{(figure.figure or 0):>17.0%}{'*' if figure.noisy else ' '}")
    print("  * flagged noisy")
    print(f"today's point estimates: {old_agree}/{n} pairs ranked as in the quiet run ({old_agree / n:.0%})")
    print(f"new figures: {new_agree} ranked as in the quiet run + {flagged} flagged within noise = "
          f"{(new_agree + flagged) / n:.0%} (goal >= 95 %); {new_wrong} ranked against it")
    print(f"the new rule on the quiet run: {quiet_ranked}/{n} pairs ranked beyond noise (the rest within it)")
    print(f"byte-identical pairs: {same_work}; ranked apart by the point estimate: {old_apart}, by the new rule: 0")


if __name__ == "__main__":
    main()
