"""Speed verdicts under noise, measured side by side in one run (docs/timing.md).

    python benchmarks/timing.py [--model shapes] [--steps 4,8,16] [--caches none,fbcache] [--prompts 6]

The same sweep is rendered twice into two out_roots, by the real `python -m render -m ...`: once on the machine
as it is ("quiet"), once while a child process started here burns CPU at random intervals ("noisy"; bounded:
it stops itself after --burn-s seconds at the latest and is killed when the render ends). Then, for every pair of
cells:

- today's point estimate: the median warm latency of each cell; the pair "agrees" when both runs put the two
  cells in the same order;
- the new figures (assess.statistics.noise, assess.statistics.compare.paired_speedup): each latency per its job's reference workload, the
  two-sample interval of the ratio widened by the reference's drift, the noisy flag. In the noisy run a pair is
  either ranked (the interval excludes 1, neither cell is flagged noisy, their images differ) and then agrees or
  not with the quiet run's point order, or flagged "within noise". Goal: >= 95 % of pairs agree or are flagged.

Byte-identical cells (every shared sample has the same image hash: the same work, e.g. a cache that never
engaged) are never ranked apart by the new rule; the benchmark counts how often today's point estimate does.

    python benchmarks/timing.py --replicate [--runs 6] [--loaders 3] [--rounds 20] [--steps 4,8] [--prompts 6]

Replication (issue 27): do two cells' speed-ups replicate across independent runs on a busy machine? The same
cells (two step counts x cache none/fbcache, and their anchor) are rendered by `--runs` independent processes,
each into its own out_root, and each run's cells are then timed side by side by `assess retime --every-pair` in a
process of their own, while `--loaders` background processes of the benchmark's own keep the machine busy the
way a shared box is (torch matrix products at the default thread count, in bursts; bounded by --burn-s, killed at
the end). Once more with no load: the quiet machine's interval widths. For every pair of contenders and both kinds
of figure (render-time: today's `paired_speedup`; side by side: `assess.statistics.side_by_side`):
(a) the fraction of runs whose 95 % interval contains the median of the other runs' point estimates;
(b) the fraction of pairs that every run ranks the same way or flags as within noise (interval holds 1);
the median interval width (high/low) under load and quiet, and the spread of the render-time point estimates
between runs (the margin `assess.statistics.side_by_side.TIMED_APART_MARGIN` states). Goal for side by side: (a) >= 0.9,
(b) >= 0.95, widths under load <= 1.5x the quiet ones.
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

from assess.statistics.noise import noise  # noqa: E402
from assess.statistics.compare import speed_order  # noqa: E402
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
        cells[run.cell_key] = CellRun(run.describe or "", warm, float((done.get("timing") or {}).get("drift") or 0.0),
                                      {(s.text_id, s.seed): s.sha256 for s in run.samples})
    return cells


def identical(a: CellRun, b: CellRun) -> bool:
    shared = set(a.hashes) & set(b.hashes)
    return bool(shared) and all(a.hashes[k] == b.hashes[k] for k in shared)


def new_order(a: CellRun, b: CellRun) -> int:
    """-1: a is faster beyond the noise, 1: b is, 0: within noise (or the same work): assess.statistics.compare.speed_order."""
    return speed_order(a.warm, b.warm, a.drift, b.drift, same_work=identical(a, b))


def point_order(a: CellRun, b: CellRun) -> int:
    return -1 if a.point < b.point else 1 if a.point > b.point else 0


LOADER = '''
import random, sys, time
import torch
random.seed(int(sys.argv[2]))
stop = time.monotonic() + float(sys.argv[1])
a = torch.randn(768, 768)
while time.monotonic() < stop:
    end = time.monotonic() + random.uniform(0.2, 1.5)  # busy: dense products at torch's default thread count
    while time.monotonic() < end:
        a = torch.tanh(a @ a)
    time.sleep(random.uniform(0.1, 1.0))  # idle
'''

Figure = tuple[float, float | None, float | None]  # speed-up of x over y, low, high


# The measured processes run one torch thread, as the README advises beside other jobs; the loaders keep torch's
# default, as a colleague's job would.
MEASURED_ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def replicate_sweep(out_root: Path, args: argparse.Namespace) -> None:
    cmd = [sys.executable, "-m", "render", "-m", f"model={args.model}", f"steps={args.steps}", f"cache={args.caches}",
           "prompts=dev", f"prompts.limit={args.prompts}", f"out_root={out_root}"]
    subprocess.run(cmd, check=True, cwd=out_root.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=MEASURED_ENV)


def side_by_side_figures(out_root: Path, args: argparse.Namespace) -> dict[tuple[str, str], Figure]:
    import json

    sweep = next((out_root / "multirun").glob("*/*"))
    cmd = [sys.executable, "-m", "assess", "retime", str(sweep), "--every-pair", "--rounds", str(args.rounds),
           "--json", "--db", str(out_root / "index.db")]
    done = subprocess.run(cmd, check=True, cwd=out_root.parent, capture_output=True, text=True, env=MEASURED_ENV)
    out = {}
    for pair in json.loads(done.stdout):
        out.update(oriented(pair["cell"], pair["against"], (pair["speedup"], pair["low"], pair["high"])))
    return out


def oriented(a: str, b: str, figure: Figure) -> dict[tuple[str, str], Figure]:
    """The figure keyed by the sorted pair: the speed-up of the first over the second."""
    if a < b:
        return {(a, b): figure}
    value, low, high = figure
    return {(b, a): (1 / value, None if high is None else 1 / high, None if low is None else 1 / low)}


def render_time_figures(out_root: Path) -> tuple[dict[tuple[str, str], Figure], dict[tuple[str, str], bool]]:
    """Today's figure for every two cells of the run (paired_speedup on their warm render-time latencies) and
    whether the two did the same work."""
    from assess.statistics.compare import paired_speedup

    runs: dict[str, CellRun] = {}
    for folder in find_run_dirs(out_root):
        run = load_run(folder)
        done = (run.terminal.data if run.terminal else {}) or {}
        if run.cell_key not in runs or run.samples and not runs[run.cell_key].warm:
            runs[run.cell_key] = CellRun(run.describe or "", [s for s in run.samples if not s.warmup and s.latency_s],
                                         float((done.get("timing") or {}).get("drift") or 0.0),
                                         {(s.text_id, s.seed): s.sha256 for s in run.samples})
    figures, same = {}, {}
    for a, b in itertools.combinations(sorted(runs), 2):
        estimate = paired_speedup(runs[b].warm, runs[a].warm, runs[b].drift, runs[a].drift)  # a over b
        if estimate is not None:
            figures[(a, b)] = (estimate.value, estimate.low, estimate.high)
            same[(a, b)] = identical(runs[a], runs[b])
    return figures, same


def coverage(runs: list[dict[tuple[str, str], Figure]]) -> tuple[int, int]:
    """(covered, total): run intervals that hold the median of the other runs' point estimates."""
    import statistics

    covered = total = 0
    for i, mine in enumerate(runs):
        for pair, (_, low, high) in mine.items():
            others = [r[pair][0] for j, r in enumerate(runs) if j != i and pair in r]
            if not others or low is None or high is None:
                continue
            total += 1
            covered += low <= statistics.median(others) <= high
    return covered, total


def verdict(figure: Figure, same_work: bool) -> int:
    value, low, high = figure
    if same_work or low is None or high is None or low <= 1 <= high:
        return 0
    return 1 if low > 1 else -1


def consistent(runs: list[dict[tuple[str, str], Figure]], same: dict[tuple[str, str], bool], ranks_same: bool
               ) -> tuple[int, int]:
    """(pairs every run ranks the same way or flags within noise, pairs)."""
    pairs = set.intersection(*(set(r) for r in runs))
    good = 0
    for pair in pairs:
        signs = {verdict(r[pair], ranks_same and same.get(pair, False)) for r in runs} - {0}
        good += len(signs) <= 1
    return good, len(pairs)


def width(runs: list[dict[tuple[str, str], Figure]]) -> float:
    import statistics

    widths = [high / low for r in runs for _, low, high in r.values() if low and high]
    return statistics.median(widths) if widths else float("nan")


def spread(runs: list[dict[tuple[str, str], Figure]]) -> float:
    """The 90th percentile of |log(point / median of the other runs' points)|, as a fraction."""
    import math
    import statistics

    devs = []
    for i, mine in enumerate(runs):
        for pair, (value, _, _) in mine.items():
            others = [r[pair][0] for j, r in enumerate(runs) if j != i and pair in r]
            if others:
                devs.append(abs(math.log(value / statistics.median(others))))
    devs.sort()
    return math.exp(devs[int(0.9 * (len(devs) - 1))]) - 1 if devs else float("nan")


def replicate(args: argparse.Namespace) -> None:
    results: dict[str, list[dict[tuple[str, str], Figure]]] = {"render": [], "side": [], "render_quiet": [],
                                                                "side_quiet": []}
    same: dict[tuple[str, str], bool] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hg-replicate-") as tmp:
        def one(name: str, loaded: bool) -> None:
            root = Path(tmp) / name
            root.mkdir()
            replicate_sweep(root, args)
            figures, identical_pairs = render_time_figures(root)
            same.update(identical_pairs)
            results["render" if loaded else "render_quiet"].append(figures)
            results["side" if loaded else "side_quiet"].append(side_by_side_figures(root, args))

        for i in range(args.quiet_runs):
            one(f"quiet{i}", False)
        loaders = [subprocess.Popen([sys.executable, "-c", LOADER, str(args.burn_s), str(args.seed + i)],
                                    env={k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"})
                   for i in range(args.loaders)]
        try:
            for i in range(args.runs):
                one(f"run{i}", True)
        finally:
            for loader in loaders:
                loader.kill()
                loader.wait()
    print(f"replication: {args.runs} runs under load ({args.loaders} background torch processes) + {args.quiet_runs} "
          f"quiet; {args.model}, steps {args.steps} x caches {args.caches} and the anchor, {args.prompts} prompts, "
          f"{args.rounds} side-by-side rounds; cpus {os.cpu_count()}; {time.perf_counter() - started:.0f} s")
    print(f"{'figure':<26} {'(a) interval holds others':>26} {'(b) ranked alike':>17} {'width load':>11} "
          f"{'width quiet':>12} {'ratio':>6}")
    for name, key, ranks_same in (("render-time (today)", "render", False), ("side by side (new)", "side", True)):
        c, n = coverage(results[key])
        g, m = consistent(results[key], same, ranks_same)
        loaded, quiet = width(results[key]), width(results[f"{key}_quiet"])
        print(f"{name:<26} {f'{c}/{n} = {c / max(n, 1):.2f}':>26} {f'{g}/{m} = {g / max(m, 1):.2f}':>17} "
              f"{loaded:>11.2f} {quiet:>12.2f} {loaded / quiet:>6.2f}")
    print(f"spread of the render-time points between runs (90th percentile): ±{spread(results['render']):.0%}; "
          f"side by side: ±{spread(results['side']):.0%}")
    print("goal, side by side: (a) >= 0.90, (b) >= 0.95, width under load <= 1.5x quiet")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="shapes")
    parser.add_argument("--steps", default="4,8,16")
    parser.add_argument("--caches", default="none,fbcache")
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--burn-s", type=float, default=900.0, help="the burner's own limit (it is also killed at the end)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--replicate", action="store_true", help="the replication benchmark (module doc)")
    parser.add_argument("--runs", type=int, default=6, help="with --replicate: independent runs under load")
    parser.add_argument("--quiet-runs", type=int, default=2, help="with --replicate: runs with no load")
    parser.add_argument("--loaders", type=int, default=3, help="with --replicate: background torch processes")
    parser.add_argument("--rounds", type=int, default=20, help="with --replicate: side-by-side rounds per run")
    args = parser.parse_args()
    if args.replicate:
        if args.steps == "4,8,16":
            args.steps = "4,8"
        replicate(args)
        return
    with tempfile.TemporaryDirectory(prefix="hg-timing-") as tmp:
        quiet_root, noisy_root = Path(tmp) / "quiet", Path(tmp) / "noisy"
        quiet_root.mkdir()
        noisy_root.mkdir()
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
