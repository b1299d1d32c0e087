"""What hypergrid costs on top of diffusers, measured side by side in one run on the tiny model.

    python benchmarks/overhead.py [--prompts 60] [--steps 28,29,30] [--repeats 3] [--separate]

(a) `python -m render` vs a bare diffusers script doing the same renders        goal <= 1.03
(b) a 3-cell sweep vs the bare script rendering all three cells in one process   goal <= 1.03
(c) re-running the finished sweep (it renders nothing) vs its first run          goal <= 0.03
--separate adds the 3-cell sweep vs 3 separate single runs: no goal, since what a sweep saves there is
the model load and the imports of two processes, which bounds it at about 0.64 for this workload.
Every figure is the median wall time of whole processes (imports included) over --repeats.
benchmarks/startup.py shows where the fixed cost behind (a) and (c) goes.
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

BARE = '''
import sys, torch, diffusers
from pathlib import Path
from render.models.tiny import ensure_tiny
from render.compose.splits import load_prompts
out, steps_list, limit = Path(sys.argv[1]), [int(s) for s in sys.argv[2].split(",")], int(sys.argv[3])
pipe = diffusers.FluxPipeline.from_pretrained(str(ensure_tiny()), dtype=torch.float32).to("cpu")
pipe.set_progress_bar_config(disable=True)
out.mkdir(parents=True, exist_ok=True)
for steps in steps_list:
    for p in load_prompts("dev.jsonl", limit):
        image = pipe(p.text, num_inference_steps=steps, guidance_scale=3.5, height=32, width=32, max_sequence_length=64,
                     generator=torch.Generator("cpu").manual_seed(0)).images[0]
        image.save(out / f"{steps}-{p.id}.png")
'''


def wall(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return time.perf_counter() - start


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=60, help="dev prompts per cell")
    parser.add_argument("--steps", default="28,29,30", help="the three cells: steps of each")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--separate", action="store_true", help="also time 3 separate single runs (no goal)")
    args = parser.parse_args()
    steps = args.steps.split(",")
    cell = ["model=tiny", "prompts=dev", f"prompts.limit={args.prompts}", "render_anchor=false"]
    render = [sys.executable, "-m", "render", *cell]
    sweep = [sys.executable, "-m", "render", "-m", *cell]
    bare = [sys.executable, "-c", BARE]
    subprocess.run([sys.executable, "-c", "from render.models.tiny import ensure_tiny; ensure_tiny()"], check=True)

    timed = ["bare1", "render1", "bare3", "sweep3", "rerun"] + (["single3"] if args.separate else [])
    t: dict[str, list[float]] = {k: [] for k in timed}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            cwd = Path(tmp)
            t["bare1"].append(wall([*bare, str(cwd / "bare1"), steps[0], str(args.prompts)], cwd))
            t["render1"].append(wall([*render, f"steps={steps[0]}", "out_root=r1"], cwd))
            t["bare3"].append(wall([*bare, str(cwd / "bare3"), ",".join(steps), str(args.prompts)], cwd))
            if args.separate:
                t["single3"].append(sum(wall([*render, f"steps={s}", f"out_root=s{s}"], cwd) for s in steps))
            t["sweep3"].append(wall([*sweep, f"steps={','.join(steps)}", "out_root=sw"], cwd))
            t["rerun"].append(wall([*sweep, f"steps={','.join(steps)}", "out_root=sw"], cwd))

    m = {k: median(v) for k, v in t.items()}
    rows: list[tuple[str, float, float | None]] = [
        ("(a) python -m render / bare diffusers script, 1 cell", m["render1"] / m["bare1"], 1.03),
        ("(b) 3-cell sweep / bare script, 3 cells in one process", m["sweep3"] / m["bare3"], 1.03),
        ("(c) re-run of the finished sweep / its first run", m["rerun"] / m["sweep3"], 0.03),
    ]
    if args.separate:
        rows.append(("    3-cell sweep / 3 separate single runs (bound ~0.64)", m["sweep3"] / m["single3"], None))
    print(f"tiny model, {args.prompts} dev prompts per cell, steps {args.steps}, median of {args.repeats} (wall s): "
          + ", ".join(f"{k}={v:.2f}" for k, v in m.items()))
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores at the end")
    for name, ratio, goal in rows:
        verdict = "no goal" if goal is None else f"goal <= {goal:.2f}  {'ok' if ratio <= goal else 'MISSED'}"
        print(f"{name:<58} {ratio:6.3f}  {verdict}")


if __name__ == "__main__":
    main()
