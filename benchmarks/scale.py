"""`assess score`, `status` and `report` of an output root with many run folders (issue 45 item 1: 5,000 runs /
100,000 samples scored from nothing in at most 60 s on the 2-core machine, rescored with nothing new in at most 5 s,
status and report in at most 10 s each; docs/scale.md has the figures).

    python benchmarks/scale.py [--runs 5000] [--samples 20] [--anchor-samples 200] [--shape distinct|shared]
                               [--no-report] [--keep DIR]
    python benchmarks/scale.py --report-of DIR/outputs [--repeat 3] [--baseline CHECKOUT]

Builds an output root through the contract module (render.rundir): one anchor with `anchor-samples` prompts and
`runs - 1` cells in sweeps of 100, each cell `samples` finished 16x16 samples of some of the anchor's prompts
(`--shape shared`: `runs - 1` runs of one cell, the first rendering its samples and every other linking them, as
re-runs and shared sweeps make: issue 61, where scoring grew with the square of such runs). Then
times, each in its own process as a user runs them, with its peak memory: `assess score <root> --metrics psnr -q`
from nothing, again with nothing new, again after 1 % new run folders were added (a sweep of their own), then
`assess status <root>` and `assess report <root>`. Prints one line per figure and a row for docs/scale.md's table.

`--report-of` times only `assess report` of a root built and scored before (`--keep`), `--repeat` times; with
`--baseline`, each time alternately with the code of another checkout (e.g. a `git worktree` of an earlier commit)
on the same root, and prints the two side by side with their ratio.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
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


def _latency(number: int, steps: int) -> float:
    """0.1 s give or take 5 %, varied by prompt and cell: a report's intervals of equal values take a shortcut that
    real latencies never do."""
    return round(0.1 * (0.95 + ((number * 7919 + steps * 31) % 101) / 1000), 6)


def write_run(path: Path, cell: dict, root: Path, numbers: list[int], is_anchor: bool,
              linked_from: Path | None = None) -> None:
    """One finished run folder; with `linked_from` (a run of the same cell and samples), its images are hard links to
    that run's and its records say they were reused from it, as a re-run or a shared sweep's are."""
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
        if linked_from is None:
            (path / image).write_bytes(png)
        else:
            os.link(linked_from / image, path / image)
        records.append(rundir.SampleRecord(
            cell_key=key, prompt_id=prompt_id, prompt=text, seed=0, image=image, width=SIZE, height=SIZE,
            latency_s=_latency(numbers[n], cell["steps"]), warmup=n == 0, steps=cell["steps"], s_per_step=0.01, peak_mem_bytes=1, mem_kind="cpu-rss-hwm",
            load_s=1.0, reused_from=None if linked_from is None else str(linked_from.relative_to(root)), finished_at="2026-11-30T10:00:01+00:00", sha256=rundir.digest(png),
            bytes=len(png), prompt_sha=rundir.text_hash(text)).as_dict())
    rundir.append_records(path / rundir.SAMPLES, records)
    rundir.write_done(path, n_samples=samples, n_rendered=samples, n_reused=0, wall_s=1.0, gpu_s=0.2)


SHAPES = ("distinct", "shared")  # each run a cell of its own samples; or every run one cell, linking its samples
SHARED_STEPS = 1  # the shared shape's one cell


def _linked(root: Path) -> Path | None:
    """The shared shape's first run, whose images every later run links (None before it is written)."""
    first = root / "multirun" / "sweep-000" / f"0_steps={SHARED_STEPS}"
    return first if (first / rundir.DONE).is_file() else None


def _write_cell_run(sweep: Path, name: int, steps: int, root: Path, numbers: list[int], shape: str) -> None:
    if shape == "shared":
        write_run(sweep / f"{name}_steps={SHARED_STEPS}", _cell(SHARED_STEPS), root, numbers, is_anchor=False,
                  linked_from=_linked(root))
    else:
        write_run(sweep / f"{name}_steps={steps}", _cell(steps), root, numbers, is_anchor=False)


def build(root: Path, runs: int, samples: int, anchor_samples: int = 200, shape: str = "distinct") -> None:
    """An anchor and `runs - 1` cell runs in sweeps of 100: each a cell of its own (distinct), or every one the same
    cell on the same samples, the first rendering them and the others linking them (shared)."""
    write_run(root / "anchors" / "tiny" / "x" / "a", ANCHOR, root, list(range(anchor_samples)), is_anchor=True)
    for n in range(runs - 1):
        sweep = root / "multirun" / f"sweep-{n // 100:03d}"
        if n % 100 == 0:
            sweep.mkdir(parents=True)
            (sweep / rundir.MULTIRUN_YAML).write_text("hydra: {}\n")
        numbers = sorted({((0 if shape == "shared" else n) * samples + i) % anchor_samples for i in range(samples)})
        _write_cell_run(sweep, n % 100, n + 1, root, numbers, shape)


def add_new(root: Path, runs: int, samples: int, anchor_samples: int, shape: str = "distinct") -> None:
    """`runs` more cell runs in a sweep of their own (a rung added to the root), numbered after every cell there is."""
    sweep = root / "multirun" / "sweep-new"
    sweep.mkdir(parents=True)
    (sweep / rundir.MULTIRUN_YAML).write_text("hydra: {}\n")
    first = 1_000_000  # steps no built cell has
    for n in range(runs):
        numbers = sorted({((0 if shape == "shared" else n) * samples + i) % anchor_samples for i in range(samples)})
        _write_cell_run(sweep, n, first + n, root, numbers, shape)


@dataclass
class Figure:
    label: str
    seconds: float
    peak_mb: float  # the process's peak resident memory
    exit: int
    said: str  # its first line (score's summary), or its line count


def timed(label: str, *args: str, code: Path | None = None) -> Figure:
    """`python -m assess ARGS` in a process of its own, as a user runs it: wall time and peak memory (wait4); with
    `code`, run from that checkout (its `assess` imported first: `-m` puts the working directory first on the path)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "assess", *args], stdout=out, stderr=err, cwd=code)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, error = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    said = text.strip().splitlines()[0] if text.strip() and args[0] == "score" else f"{len(text.splitlines())} lines"
    if process.returncode:
        said += f"; stderr: {error.strip()[-300:]}"
    return Figure(label, seconds, usage.ru_maxrss / 1024, process.returncode, said)


def measure(root: Path, runs: int, samples: int, anchor_samples: int, report: bool = True,
            shape: str = "distinct") -> list[Figure]:
    """Each figure, printed as soon as it is measured (a long run shows what it has so far)."""
    db = root / "index.db"
    score = ("score", str(root), "--db", str(db), "--metrics", "psnr", "-q")
    figures: list[Figure] = []

    def add(figure: Figure) -> None:
        figures.append(figure)
        print(f"assess {figure.label} of {runs} run folders: {figure.seconds:.1f} s, peak {figure.peak_mb:.0f} MB "
              f"(exit {figure.exit}) {figure.said}", flush=True)

    add(timed("score (first)", *score))
    add(timed("score (nothing new)", *score))
    add_new(root, max(runs // 100, 1), samples, anchor_samples, shape)
    add(timed("score (1 % new)", *score))
    add(timed("status", "status", str(root), "--db", str(db)))
    if report:  # the first report computes every interval; the next finds them in the memo (assess.statistics.memo)
        with tempfile.TemporaryDirectory() as out:
            add(timed("report", "report", str(root), "--db", str(db), "--out", str(Path(out) / "report")))
            add(timed("report (again)", "report", str(root), "--db", str(db), "--out", str(Path(out) / "report")))
    return figures


def report_of(root: Path, repeat: int, baseline: Path | None) -> None:
    """`assess report` of a kept root, `repeat` times; with a baseline checkout, each time that code's report first
    and then this one's, alternately on the same root (the machine's load falls on both alike). Each report is a
    first one (the interval memo beside the index removed before it); this code's is then timed again, its
    intervals remembered (assess.statistics.memo)."""
    from assess.statistics.memo import memo_path

    db = root / "index.db"
    here = Path(__file__).resolve().parent.parent
    codes = ([("baseline", baseline.resolve())] if baseline else []) + [("this", here), ("this, again", here)]
    seconds: dict[str, list[float]] = {name: [] for name, _ in codes}
    for n in range(repeat):
        for name, code in codes:
            if not name.endswith("again"):
                memo_path(db).unlink(missing_ok=True)
            with tempfile.TemporaryDirectory() as out:
                figure = timed(f"report ({name})", "report", str(root), "--db", str(db), "--out",
                               str(Path(out) / "report"), code=code)
            seconds[name].append(figure.seconds)
            print(f"run {n + 1}: assess report ({name}: {code}): {figure.seconds:.1f} s, peak {figure.peak_mb:.0f} MB "
                  f"(exit {figure.exit}) {figure.said}", flush=True)
    if baseline:
        pairs = zip(seconds["baseline"], seconds["this"])
        print("ratios (baseline / this, each run): " + ", ".join(f"{b / t:.2f}" for b, t in pairs))
    print(f"best of {repeat}: " + ", ".join(f"{name} {min(values):.1f} s" for name, values in seconds.items()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--anchor-samples", type=int, default=200)
    parser.add_argument("--shape", choices=SHAPES, default="distinct",
                        help="distinct: each run a cell of its own samples; shared: every run one cell, linking its "
                             "samples (re-runs, shared sweeps)")
    parser.add_argument("--no-report", action="store_true", help="leave the report out (its figure and contact sheets)")
    parser.add_argument("--keep", type=Path, default=None, help="build the output root here (and keep it)")
    parser.add_argument("--report-of", type=Path, default=None,
                        help="time only `assess report` of this root, built and scored before (--keep DIR: DIR/outputs)")
    parser.add_argument("--repeat", type=int, default=3, help="with --report-of: how many times")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="with --report-of: another checkout whose report is timed alternately with this one's")
    args = parser.parse_args(argv)
    if args.report_of:
        report_of(args.report_of, args.repeat, args.baseline)
        return
    with tempfile.TemporaryDirectory() as scratch:
        root = (args.keep or Path(scratch)) / "outputs"
        if root.exists():
            raise SystemExit(f"{root} exists: the benchmark adds 1 % new runs to the root it builds; give a new --keep")
        start = time.perf_counter()
        build(root, args.runs, args.samples, args.anchor_samples, args.shape)
        print(f"built {args.runs} run folders ({args.samples} samples each, the anchor {args.anchor_samples}; "
              f"{args.shape}) in {time.perf_counter() - start:.1f} s", flush=True)
        figures = measure(root, args.runs, args.samples, args.anchor_samples, report=not args.no_report,
                          shape=args.shape)
        cells = " | ".join(f"{f.seconds:.1f} s" for f in figures)
        print(f"| {args.runs:,} {args.shape} | {(args.runs - 1) * args.samples + args.anchor_samples:,} | {cells} | "
              f"{max(f.peak_mb for f in figures):.0f} MB |")


if __name__ == "__main__":
    main()
