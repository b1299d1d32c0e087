"""Where a run's fixed cost goes: each phase's share of a do-nothing re-run, a one-cell run and a many-cell
preflight, profiled in one run on the tiny model.

    python benchmarks/startup.py [--prompts 60] [--cells 300] [--only rerun|one-cell|preflight ...]

Each workload runs `python -m render` in a fresh process under cProfile; a phase's figure is the cumulative
time of the functions that make it (phases nest: an indented phase is part of the one above it), as a share
of the whole process. The whole process is also timed without the profiler (its wall seconds, printed first).

    rerun      the finished 3-cell sweep run again (renders nothing)           fixed cost: goal <= 3 % of its first run
    one-cell   a single cell rendered from scratch                             what imports and checks add to it
    preflight  a --cells-cell sweep composed and checked, stopped before launch  goal: < 10 s for 300 cells
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# (label, depth, (file suffix, function name) ...): the phases a run's time is cut into, outer first.
PHASES: list[tuple[str, int, tuple[tuple[str, str], ...]]] = [
    ("imports (all, lazy ones too)", 0, (("<frozen importlib._bootstrap>", "_find_and_load"),)),
    ("Hydra composition (every config)", 0, (("hydra/_internal/config_loader_impl.py", "_load_configuration_impl"),)),
    ("merges from scratch (the memo's misses)", 1, (("hydra/_internal/config_loader_impl.py", "_compose_config_from_defaults_list"),)),
    ("preflight: every cell", 0, (("render/run/preflight.py", "preflight_config"),)),
    ("build the job (prompts, weights identity)", 1, (("render/cell.py", "build_job"),)),
    ("read prompt files", 2, (("render/compose/splits.py", "load_prompts"),)),
    ("folder digests", 2, (("render/rundir/identity.py", "folder_digest"),)),
    ("environment checks (axes, model)", 1, (("render/run/preflight.py", "check_job"),)),
    ("laws (holdout, anchor, rule)", 1, (("render/laws/__init__.py", "check_experiment"),)),
    ("text identities", 0, (("render/rundir/identity.py", "text_hash"),)),
    ("hub probe", 0, (("render/run/online.py", "hub_reachable"),)),
    ("budget and launch record", 0, (("render/run/preflight.py", "preflight_budget"), ("render/laws/__init__.py", "record_launch"))),
    ("the cells' jobs (render_task)", 0, (("render/app.py", "render_task"),)),
    ("sample store scan", 1, (("render/rundir/store.py", "_scan"),)),
    ("sample lookups", 1, (("render/rundir/store.py", "find"),)),
    ("image digests (verified before reuse)", 2, (("render/rundir/digests.py", "digest"),)),
    ("claims", 1, (("render/rundir/store.py", "claim"),)),
    ("run.json (provenance)", 1, (("render/run/runner.py", "run_json"),)),
    ("pipeline load", 1, (("render/run/loader.py", "get"),)),
    ("rendering samples", 1, (("render/run/runner.py", "render_sample"),)),
]

# Runs in the child: `python -m render <args>`, profiled into argv[1] unless it is "-"; with
# HYPERGRID_STOP_AT_LAUNCH set, the sweep ends where its launcher would start the cells (what a many-cell
# sweep costs before its first render).
DRIVER = r"""
import cProfile, os, runpy, sys
profile_path, argv = sys.argv[1], sys.argv[2:]
if os.environ.get("HYPERGRID_STOP_AT_LAUNCH"):  # the sweeper starts the exporter right before the launcher
    import render.run.live_metrics
    def stop(*args, **kwargs):
        raise SystemExit(0)
    render.run.live_metrics.start_exporter = stop
sys.argv = ["render", *argv]
profiler = cProfile.Profile()
if profile_path != "-":
    profiler.enable()
try:
    runpy.run_module("render", run_name="__main__", alter_sys=True)
except SystemExit as exit:
    if exit.code not in (0, None):
        raise
finally:
    profiler.disable()
    if profile_path != "-":
        profiler.dump_stats(profile_path)
"""


WORKLOADS = ["rerun", "one-cell", "preflight"]


def cumulative(profile: Path) -> tuple[float, dict[tuple[str, str], float]]:
    """(the profiled total, cumulative seconds by (file, function)); `_find_and_load` is every import."""
    import pstats

    stats = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    by_function: dict[tuple[str, str], float] = {}
    for (file, _, name), (_, _, _, cum, _) in stats.items():
        by_function[(file, name)] = by_function.get((file, name), 0.0) + cum
    total = by_function.get(("<frozen runpy>", "run_module"), 0.0)
    return total, by_function


def import_seconds() -> float:
    """Wall seconds of the imports `python -m render` makes before composing (no profiler)."""
    code = ("import time; t = time.perf_counter(); import render.__main__, hydra_plugins.hypergrid.sweeper, "
            "hydra_plugins.hypergrid.inprocess; print(time.perf_counter() - t)")
    return float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)


def phase_seconds(functions: dict[tuple[str, str], float], keys: tuple[tuple[str, str], ...]) -> float:
    return sum(seconds for (file, name), seconds in functions.items()
               for suffix, wanted in keys if file.endswith(suffix) and name == wanted)


def run(args: list[str], cwd: Path, out_root: str, *, fresh: bool = False,
        stop_at_launch: bool = False) -> tuple[float, float, dict[tuple[str, str], float]]:
    """(wall seconds without the profiler, profiled total, cumulative seconds by function) of one render command
    into `out_root`; `fresh`: the profiled run gets an output root of its own (it renders again)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **({"HYPERGRID_STOP_AT_LAUNCH": "1"} if stop_at_launch else {})}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", DRIVER, "-", *args, f"out_root={out_root}"], cwd=cwd, check=True, env=env,
                   capture_output=True)
    wall = time.perf_counter() - start
    profile = cwd / "run.prof"
    profiled_root = f"{out_root}-profiled" if fresh else out_root
    subprocess.run([sys.executable, "-c", DRIVER, str(profile), *args, f"out_root={profiled_root}"], cwd=cwd, check=True,
                   env=env, capture_output=True)
    total, functions = cumulative(profile)
    return wall, total, functions


def report(title: str, wall: float, total: float, functions: dict[tuple[str, str], float]) -> None:
    print(f"\n{title}: {wall:.2f} s wall (unprofiled); profiled {total:.2f} s, shares of the profiled process:", flush=True)
    for label, depth, keys in PHASES:
        seconds = phase_seconds(functions, keys)
        if seconds > 0:
            print(f"  {'  ' * depth}{label:<{46 - 2 * depth}} {100 * seconds / total:5.1f} %  {seconds:7.3f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=60, help="dev prompts per cell")
    parser.add_argument("--cells", type=int, default=300, help="cells of the preflight-only sweep")
    parser.add_argument("--steps", default="28,29,30", help="the re-run sweep's three cells: steps of each")
    parser.add_argument("--only", choices=WORKLOADS, action="append", help="run these workloads only (default: all)")
    args = parser.parse_args()
    only = args.only or WORKLOADS
    subprocess.run([sys.executable, "-c", "from render.models.tiny import ensure_tiny; ensure_tiny()"], check=True)
    cell = ["model=tiny", "prompts=dev", f"prompts.limit={args.prompts}", "render_anchor=false"]
    print(f"tiny model, {args.prompts} dev prompts per cell; imports alone: {import_seconds():.2f} s wall; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        if "rerun" in only:
            sweep = ["-m", *cell, f"steps={args.steps}"]
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "render", *sweep, "out_root=sw"], cwd=cwd, check=True, capture_output=True)
            first = time.perf_counter() - start
            wall, total, functions = run(sweep, cwd, "sw")
            report(f"rerun of the finished 3-cell sweep (its first run: {first:.2f} s; ratio {wall / first:.3f}, "
                   "goal <= 0.03)", wall, total, functions)
        if "one-cell" in only:
            report("one-cell run", *run([*cell, f"steps={args.steps.split(',')[0]}"], cwd, "one", fresh=True))
        if "preflight" in only:
            steps = f"range(1,{args.cells + 1})"
            wall, total, functions = run(["-m", *cell, f"steps={steps}"], cwd, "many", stop_at_launch=True)
            report(f"preflight of a {args.cells}-cell sweep, stopped before launch ({wall / args.cells * 1000:.1f} ms a "
                   "cell; goal < 10 s for 300)", wall, total, functions)


if __name__ == "__main__":
    main()
