"""GPU check of the parallel axis (docs/parallel.md): every option the machine can hold, rendered for real through
`python -m render` (its ranks, its width-1 twin), scored for parity against the twin with `assess score`, and timed
side by side with the twin and the anchor with `assess retime`. It prints one line per option: its width, the
worst drift against the twin (levels, SSIM) and the speed-up over the twin (the scaling efficiency is it over the
width), or what it needs that the machine does not have.

    python benchmarks/gpu_parallel.py                                      # CUDA: every option; a few minutes
    python benchmarks/gpu_parallel.py --options ulysses,ring --model tiny --prompts 4
    python benchmarks/gpu_parallel.py --device cpu --options none,ulysses  # the same code path on the CPU (tests)

On a one-GPU machine no parallel kernel can run: each option is reported as not checked (it needs 2 or 4 GPUs).
Without CUDA, and without --device cpu, it exits 2. A deadline stops starting new options (the run stays under 10
minutes).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

OPTIONS = ("none", "ulysses", "ring", "usp", "tensor")
WIDTHS = {"none": 1, "ulysses": 2, "ring": 2, "usp": 4, "tensor": 2}  # render/conf/parallel/*.yaml's defaults
DEADLINE_S = 540


@dataclass
class Result:
    option: str
    width: int
    outcome: str  # "ok", "not checked: ...", "failed: ..."
    max_levels: int | None = None
    ssim: float | None = None
    over_twin: float | None = None

    def line(self) -> str:
        if self.outcome != "ok":
            return f"{self.option:8s} width {self.width}: {self.outcome}"
        drift = f"drift {self.max_levels} level(s), SSIM {self.ssim:.4f}" if self.max_levels is not None else "no drift (width 1)"
        speed = f"{self.over_twin:.2f}x over its twin ({100 * self.over_twin / self.width:.0f} % scaling efficiency)" \
            if self.over_twin is not None else "not timed against its twin"
        return f"{self.option:8s} width {self.width}: {drift}; {speed}"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True)


def _check(option: str, args: argparse.Namespace, gpus: int, work: Path) -> Result:
    width = WIDTHS[option]
    if args.device == "cpu" and option not in ("none", "ulysses"):
        return Result(option, width, "not checked: it does not run on the CPU (gloo)")
    if args.device != "cpu" and width > gpus:
        return Result(option, width, f"not checked: needs {width} GPUs, this machine has {gpus}")
    out = work / option
    render = _cli("render", f"model={args.model}", f"parallel={option}", f"device={args.device}",
                  f"prompts.limit={args.prompts}", f"out_root={out}", cwd=work)
    if render.returncode != 0:
        return Result(option, width, f"failed: render exited {render.returncode}: {render.stderr.strip().splitlines()[-1:]}")
    db = out / "index.db"
    scored = _cli("assess", "score", str(out), "--db", str(db), "--metrics", "psnr", "-q", cwd=work)
    if scored.returncode != 0:
        return Result(option, width, f"failed: assess score exited {scored.returncode}")
    result = Result(option, width, "ok")
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT max_levels, ssim FROM parity").fetchall()
    if rows:
        result.max_levels = max(r[0] for r in rows if r[0] is not None)
        result.ssim = min(r[1] for r in rows if r[1] is not None)
    if width > 1:
        timed = _cli("assess", "retime", str(out), "--db", str(db), "--rounds", str(args.rounds), "--every-pair",
                     "--json", *(["--device", args.device] if args.device == "cpu" else []), cwd=work)
        if timed.returncode != 0:
            return Result(option, width, f"failed: assess retime exited {timed.returncode}: "
                          f"{timed.stderr.strip().splitlines()[-1:]}", result.max_levels, result.ssim)
        result.over_twin = _over_twin(out, json.loads(timed.stdout[timed.stdout.index("["):]))
    return result


def _over_twin(out: Path, pairs: list[dict]) -> float | None:
    """The parallel cell's speed-up over its width-1 twin, from the pairs `assess retime` timed."""
    from render.rundir import load_runs

    runs = load_runs([out])
    wide = next((r for r in runs if r.twin_key is not None), None)
    if wide is None:
        return None
    for p in pairs:
        if (p["cell"], p["against"]) == (wide.cell_key, wide.twin_key):
            return float(p["speedup"])
        if (p["against"], p["cell"]) == (wide.cell_key, wide.twin_key):
            return 1 / float(p["speedup"])
    return None


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--options", default=",".join(OPTIONS), help=f"comma-separated, of {', '.join(OPTIONS)}")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--deadline", type=float, default=DEADLINE_S)
    args = parser.parse_args(argv)
    options = [o.strip() for o in args.options.split(",") if o.strip()]
    unknown = [o for o in options if o not in OPTIONS]
    if unknown:
        parser.error(f"--options {','.join(unknown)}: valid are {', '.join(OPTIONS)}")
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if args.device == "cuda" and not gpus:
        print("gpu_parallel: no CUDA device here; run it on a GPU machine, or pass --device cpu (ulysses only)",
              file=sys.stderr)
        raise SystemExit(2)
    start, results = time.monotonic(), []
    with tempfile.TemporaryDirectory(prefix="gpu-parallel-") as tmp:
        for option in options:
            if time.monotonic() - start > args.deadline:
                results.append(Result(option, WIDTHS[option], f"skipped (the {args.deadline} s deadline has passed)"))
            else:
                results.append(_check(option, args, gpus, Path(tmp)))
            print(results[-1].line(), flush=True)
    return results


if __name__ == "__main__":
    main()
