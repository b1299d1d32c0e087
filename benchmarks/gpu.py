"""The device run (issue 43): one command that checks hypergrid on a CUDA GPU in at most 9 minutes, in three parts,
each behind its own deadline and writing its results as it goes (docs/gpu.md).

    python benchmarks/gpu.py --out gpu-run                      # CUDA: render, stacked, families; 540 s in all
    python benchmarks/gpu.py --out gpu-run --parts stacked --deadline 200
    python benchmarks/gpu.py --out rehearsal --device cpu --scale tiny   # the same path on the CPU (tests/test_benchmark_gpu.py)

1. render: the CUDA path of `python -m render` itself: the tiny twins rendered with every attention backend, every
   cache, compile=regional, quant=fp8dq and int8wo, offload=model and group, then `assess score` and `assess
   retime` on what was rendered: one line per option, ok or its error. Each option is one cell of a sweep
   (`+gpucheck=<model>_<option>`, a config of this run's own `conf/` folder), so a preflight refusal costs that
   option only (the sweep runs again without it) and a cell's failure is its FAILED.json; a sweep that crashes
   or hangs loses the cell in flight, and the rest run in a new sweep.
2. stacked: benchmarks/gpu_check.py --stacked: the full-size random-weight FLUX.1-dev transformer at 1024², 28
   steps, eager vs regional compile, fp8dq + compile, fp8dq + compile + fbcache, timed side by side in one process:
   warm latency (CUDA events beside perf_counter), compile time, peak memory, speed-up over eager with its interval.
3. families: benchmarks/gpu_families.py's per-step figures (FLUX.2, Qwen-Image, Wan 2.1) until its deadline.

The run has one deadline (--deadline, 540 s); each part gets a share of what is left when it starts (what an
earlier part did not use goes to the later ones), runs in its own processes and is killed at its share's end.
Every result is a JSON line appended to OUT/results.jsonl as soon as it is known; OUT/summary.md (the machine, the
versions, the date and every line) is rewritten after each part, ready for docs/gpu.md. Bad arguments exit 2
before anything runs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # this checkout's render and assess, installed or not (the lent GPU machine: not)
    sys.path.insert(0, str(ROOT))
CONF = ROOT / "render" / "conf"
PARTS = ("render", "stacked", "families")
SHARES = {"render": 0.35, "stacked": 0.45, "families": 0.2}  # of the time left when the part starts
SWEEPS_SHARE = 0.75  # of the render part: the rest is kept for `assess score` and `assess retime`
DEADLINE_S = 540.0
SUMMARY_RESERVE_S = 5.0  # kept back from the parts for the summary
TWINS = ("tiny", "tiny-flux2", "tiny-qwen-image", "tiny-z-image", "tiny-wan")
METRICS = "psnr,ssim,temporal_ssim"  # what `assess score` computes offline on any machine (no hub model)
REFUSED = re.compile(r"^\s*\[(?P<overrides>[^\]]*)\] (?P<why>.+)$")  # one cell of preflight's refusal (render.run.preflight)


@dataclass(frozen=True)
class Option:
    """One render option on one model: a cell of the render part."""

    model: str
    axis: str  # "default" (the model's own cell), attention, cache, compile, quant, offload
    value: str = ""
    extra: str = ""  # YAML appended to the option's config (the rehearsal's dynamo-only compile)

    @property
    def id(self) -> str:  # the +gpucheck option name: a safe name, one per (model, option)
        return f"{self.model}_{self.axis}-{self.value}" if self.value else f"{self.model}_default"

    @property
    def label(self) -> str:
        return f"model={self.model}" + (f" {self.axis}={self.value}" if self.value else "")

    @property
    def short(self) -> str:
        return f"{self.axis}={self.value}" if self.value else "default"

    def config(self) -> str:
        lines = ["# @package _global_", "defaults:", f"  - override /model: {self.model}"]
        if self.value:
            lines.append(f"  - override /{self.axis}: {self.value}")
        return "\n".join(lines) + "\n" + self.extra


@dataclass
class Scale:
    """What a scale renders and times: `full` is the device run, `tiny` its CPU rehearsal (small sizes, few
    steps and rounds, trimmed lists: each kind of option still exercised once)."""

    models: tuple[str, ...]
    options: Dict[str, tuple[str, ...]]  # axis -> values
    render_args: tuple[str, ...]
    grouped: bool  # one sweep per axis (a CUDA fault that poisons its process fails one axis' later cells); else one sweep
    retimed: tuple[str, ...]  # the options `assess retime` times against their anchor, on the first model
    compile_extra: str
    stacked_args: tuple[str, ...]
    families_args: tuple[str, ...]


def _values(group: str, skip: tuple[str, ...] = ("none",)) -> tuple[str, ...]:
    """The options of a config group, as `python -m render --help` lists them (render/conf/<group>/*.yaml)."""
    return tuple(sorted(p.stem for p in (CONF / group).glob("*.yaml") if p.stem not in skip))


def scale_of(name: str) -> Scale:
    options = {"attention": _values("attention", ()), "quant": ("fp8dq", "int8wo"), "offload": ("model", "group"),
               "compile": ("regional",), "cache": _values("cache")}
    if name == "full":
        return Scale(TWINS, options, (), True, ("default", "compile=regional", "quant=int8wo", "quant=fp8dq", "cache=fbcache"),
                     "", ("--stacked",), ())
    return Scale(("tiny",), {**options, "attention": ("native", "sdpa-flash", "flash", "cudnn"),
                             "cache": ("fbcache", "seacache")},
                 ("steps=2", "model.anchor.steps=4"), False, ("default",),
                 "compile:\n  backend: eager\n",  # dynamo only: an inductor compile takes tens of s on a CPU
                 ("--stacked", "--scale", "tiny", "--steps", "2", "--backend", "eager"),
                 ("--scale", "tiny", "--backend", "eager", "--repeats", "1", "--blocks", "1", "--models", "wan"))


def options_of(scale: Scale) -> List[Option]:
    out = [Option(model, "default") for model in scale.models]
    # the CUDA-only paths first (kernels, torchao, offload streams, inductor): a deadline cuts the caches, which the
    # CPU tests run too
    for axis in ("attention", "quant", "offload", "compile", "cache"):
        extra = scale.compile_extra if axis == "compile" else ""
        out += [Option(model, axis, value, extra) for model in scale.models for value in scale.options[axis]]
    return out


# --- results -------------------------------------------------------------------------------------------------------


class Results:
    """OUT/results.jsonl, appended and flushed line by line (a killed run keeps every line written), and the rows."""

    def __init__(self, out: Path) -> None:
        self.path = out / "results.jsonl"
        self.rows: List[Dict[str, Any]] = []

    def add(self, part: str, status: str, line: str, **fields: Any) -> Dict[str, Any]:
        row = {"part": part, "status": status, "line": line, **fields, "at": _now()}
        with self.path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(row, default=str) + "\n")
            file.flush()
        self.rows.append(row)
        option = fields.get("option")
        print(f"[{part}] {status}: " + (line if not option or line.startswith(str(option)) else f"{option}: {line}"), flush=True)
        return row


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


# --- processes -----------------------------------------------------------------------------------------------------


@dataclass
class Ran:
    returncode: Optional[int]  # None: killed at its timeout
    seconds: float
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def why(self) -> str:
        """The process's end in words, with the last line of what it said."""
        last = next((line for line in reversed(self.stderr.strip().splitlines()) if line.strip()), "")
        end = f"killed at its deadline after {self.seconds:.0f} s" if self.timed_out else f"exited {self.returncode}"
        return end + (f": {last.strip()[:300]}" if last else "")


def child_env() -> Dict[str, str]:
    """This checkout first on the path (with or without `pip install -e`), unbuffered output."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}


def run(argv: List[str], timeout: float, log: Path, cwd: Path, on_line: Callable[[str], None] = lambda line: None) -> Ran:
    """`argv` in its own process group, its stdout given line by line to `on_line` (and the log), its stderr to
    `log`.err; the group is killed at `timeout` seconds (a hang or a CUDA fault costs this process only)."""
    started = time.monotonic()
    with log.open("a", encoding="utf-8") as out, log.with_suffix(".err").open("a+", encoding="utf-8") as err:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        err.seek(0, os.SEEK_END)
        err_start = err.tell()
        proc = subprocess.Popen(argv, cwd=cwd, env=child_env(), stdout=subprocess.PIPE, stderr=err, text=True,
                                start_new_session=True, bufsize=1)
        lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
        timed_out = False
        while True:
            left = timeout - (time.monotonic() - started)
            try:
                line = lines.get(timeout=max(left, 0.01))
            except queue.Empty:
                timed_out = True
                _kill(proc)
                break
            if line is None:
                break
            out.write(line)
            out.flush()
            on_line(line.rstrip("\n"))
        proc.wait()
        err.seek(err_start)
        stderr = err.read()
    return Ran(None if timed_out else proc.returncode, time.monotonic() - started, stderr)


def _pump(stream: Any, lines: "queue.Queue[Optional[str]]") -> None:
    """A process's stdout into `lines`, then None at its end (the reader never blocks the deadline)."""
    for line in stream:
        lines.put(line)
    lines.put(None)


def _kill(proc: subprocess.Popen) -> None:
    """SIGTERM to the whole group (render records the cell in flight as cancelled), SIGKILL 10 s later."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


class Clock:
    """The run's deadline, shared out: a part gets its share of what is left when it starts."""

    def __init__(self, total: float) -> None:
        self.end = time.monotonic() + total - SUMMARY_RESERVE_S

    def left(self) -> float:
        return max(self.end - time.monotonic(), 0.0)

    def share(self, part: str, remaining_parts: List[str]) -> float:
        return self.left() * SHARES[part] / sum(SHARES[p] for p in remaining_parts)


# --- part 1: render ------------------------------------------------------------------------------------------------


@dataclass
class RenderPart:
    args: argparse.Namespace
    scale: Scale
    results: Results
    budget: float
    started: float = field(default_factory=time.monotonic)
    done: Dict[Option, Path] = field(default_factory=dict)  # each rendered option's run directory, for score and retime
    keys: Dict[str, str] = field(default_factory=dict)  # cell key -> its option's label

    def left(self, share: float = 1.0) -> float:
        return max(self.budget * share - (time.monotonic() - self.started), 0.0)

    @property
    def work(self) -> Path:
        return self.args.out / "render"

    def go(self) -> None:
        options = options_of(self.scale)
        folder = self.work / "conf" / "gpucheck"  # this run's own configs: found by `python -m render` run from work
        folder.mkdir(parents=True, exist_ok=True)
        for option in options:
            (folder / f"{option.id}.yaml").write_text(option.config(), encoding="utf-8")
        groups: Dict[str, List[Option]] = {}
        for option in options:
            groups.setdefault(option.axis if self.scale.grouped else "all", []).append(option)
        for name, group in groups.items():
            self.sweep(name, group)
        self.score()
        self.retime()

    def record(self, option: Option, status: str, line: str, **fields: Any) -> None:
        self.results.add("render", status, line, option=option.label, model=option.model, axis=option.axis,
                         value=option.value, **fields)

    def sweep(self, name: str, options: List[Option]) -> None:
        """Render the group's options in one sweep; again without what preflight refused or a crash lost."""
        pending, attempt = list(options), 0
        while pending:
            if self.left(SWEEPS_SHARE) < 1:
                for option in pending:
                    self.record(option, "skipped", "not run: the render part's deadline had passed")
                return
            attempt += 1
            sweep_dir = self.work / "sweeps" / f"{name}-{attempt}"
            argv = [sys.executable, "-m", "render", "-m", "+gpucheck=" + ",".join(o.id for o in pending),
                    f"device={self.args.device}", f"prompts.limit={self.args.prompts}", "timing.side_by_side=false",
                    f"out_root={self.work / 'outputs'}", f"hydra.sweep.dir={sweep_dir}", *self.scale.render_args]
            ran = run(argv, self.left(SWEEPS_SHARE), self.work / "render.log", self.work)
            if ran.returncode == 2 and not sweep_dir.exists():
                refused = self.refusals(ran.stderr, pending)
                if not refused:  # a refusal of the whole sweep: every option of it carries the error
                    for option in pending:
                        self.record(option, "failed", f"python -m render refused the sweep: {ran.why()}")
                    return
                for option, why in refused.items():
                    self.record(option, "unavailable", f"not available here: {why}")
                pending = [o for o in pending if o not in refused]
                continue
            pending = self.read(sweep_dir, pending, ran)

    @staticmethod
    def refusals(stderr: str, pending: List[Option]) -> Dict[Option, str]:
        """The options preflight refused, each with its reason (render.run.preflight lists every bad cell)."""
        by_id = {f"+gpucheck={o.id}": o for o in pending}
        out: Dict[Option, str] = {}
        for line in stderr.splitlines():
            match = REFUSED.match(line)
            option = match and next((by_id[w] for w in match["overrides"].split() if w in by_id), None)
            if match and option is not None:
                out[option] = match["why"]
        return out

    def read(self, sweep_dir: Path, pending: List[Option], ran: Ran) -> List[Option]:
        """Record each cell's terminal state; return what is left to run (none after a timeout)."""
        from render.rundir import load_sweep, read_terminal

        info = load_sweep(sweep_dir) if sweep_dir.exists() else None
        cells = {next((w.split("=", 1)[1] for w in c.overrides if w.startswith("+gpucheck=")), ""): c
                 for c in (info.cells if info else [])}
        left: List[Option] = []
        lost: Optional[Option] = None  # the cell in flight when the sweep died
        for option in pending:
            cell = cells.get(option.id)
            run_dir = sweep_dir / cell.subdir if cell is not None and cell.subdir else None
            terminal = read_terminal(run_dir) if run_dir is not None and run_dir.is_dir() else None
            if terminal is not None and terminal.category is None:
                self.done[option] = run_dir  # type: ignore[assignment]
                if cell is not None and cell.cell_key:
                    self.keys.setdefault(cell.cell_key, option.label)  # the default cell is also attention=native's: its name kept
                self.record(option, "ok", f"rendered ({cell.n_expected if cell else '?'} sample(s))", run_dir=str(run_dir))
            elif terminal is not None:
                message = str(terminal.data.get("message", "")).strip().splitlines()
                self.record(option, "failed", f"{terminal.category}: {message[0][:300] if message else ''}",
                            category=terminal.category, run_dir=str(run_dir))
            elif lost is None and (run_dir is not None and run_dir.is_dir() or ran.returncode not in (0, 1)):
                lost = option
                status = "timeout" if ran.timed_out else "crashed"
                self.record(option, status, f"the sweep {ran.why()} while this cell was rendering", run_dir=str(run_dir))
            else:
                left.append(option)
        if ran.timed_out:
            for option in left:
                self.record(option, "skipped", "not run: the render part's deadline had passed")
            return []
        if lost is None and ran.returncode in (0, 1) and left:  # nothing crashed, yet cells have no record
            for option in left:
                self.record(option, "failed", f"no terminal record after the sweep {ran.why()}")
            return []
        return left

    def score(self) -> None:
        label = {"option": "assess score", "model": None, "axis": "assess", "value": "score"}
        if not self.done:
            self.results.add("render", "skipped", "assess score: nothing was rendered", **label)
            return
        db = self.work / "index.db"
        argv = [sys.executable, "-m", "assess", "score", str(self.work / "outputs"), "--db", str(db), "--metrics", METRICS, "-q"]
        said: List[str] = []
        ran = run(argv, self.left(), self.work / "assess.log", self.work, said.append)
        if ran.returncode == 0:
            self.results.add("render", "ok", f"assess score: {said[-1] if said else 'scored'}", **label)
        else:
            self.results.add("render", "failed", f"assess score {ran.why()}", **label)

    def retime(self) -> None:
        label = {"option": "assess retime", "model": None, "axis": "assess", "value": "retime"}
        runs = [str(path) for option, path in self.done.items()
                if option.model == self.scale.models[0] and option.short in self.scale.retimed]
        if not runs:
            self.results.add("render", "skipped", "assess retime: none of its options was rendered", **label)
            return
        seconds = max(self.left() / 2, 6.0)
        argv = [sys.executable, "-m", "assess", "retime", *runs, "--db", str(self.work / "index.db"), "--rounds",
                str(self.args.rounds), "--seconds", f"{seconds:.0f}", "--json", "--device", self.args.device]
        # the device named, not left to retime's `auto`: that finds CUDA by the driver's device files
        said: List[str] = []
        ran = run(argv, self.left(), self.work / "assess.log", self.work, said.append)
        text = "\n".join(said)
        if ran.returncode != 0 or "[" not in text:
            self.results.add("render", "failed", f"assess retime {ran.why()}", **label)
            return
        pairs = json.loads(text[text.index("["):])
        self.results.add("render", "ok", f"assess retime: {len(pairs)} pair(s) timed side by side", **label)
        for pair in pairs:
            name = self.keys.get(pair["cell"], pair["cell"])
            against = self.keys.get(pair["against"], f"its anchor {pair['against']}")
            low, high = pair.get("low"), pair.get("high")
            interval = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else " (no interval)"
            self.results.add("render", "ok", f"retime {name} vs {against}: {pair['speedup']:.2f}x{interval} over "
                             f"{pair['rounds']} rounds", option=f"retime {name}", model=None, axis="retime",
                             value=name, speedup=pair["speedup"], low=low, high=high, rounds=pair["rounds"])


# --- parts 2 and 3: stacked and families ---------------------------------------------------------------------------


def stacked_part(args: argparse.Namespace, scale: Scale, results: Results, budget: float) -> None:
    """benchmarks/gpu_check.py --stacked --json in its own process; each warm-up as it ends, then each contender's
    speed-up over eager from the rounds (assess.statistics.side_by_side)."""
    from assess.statistics.side_by_side import round_speedup

    eager: List[float] = []
    seen: List[str] = []

    def on_line(line: str) -> None:
        try:
            row = json.loads(line)
        except ValueError:
            return
        kind, name = row.get("kind"), row.get("name")
        if kind == "header":
            results.add("stacked", "ok", row["line"], option="setup")
        elif kind == "warmed":
            status = "failed" if row["error"] else "ok"
            line = row["error"] or (f"warmed up: first call {row['first_s']:.2f} s"
                                    + (f", peak {row['peak_bytes'] / 2**30:.1f} GiB" if row["peak_bytes"] else ""))
            results.add("stacked", status, f"{name}: {line}", option=f"{name} (warm-up)", **_figures(row))
        elif kind == "timed" and row["latencies"]:
            if name == "eager":
                eager[:] = row["latencies"]
            rounds = min(len(eager), len(row["latencies"]))
            speedup = round_speedup(row["latencies"][:rounds], eager[:rounds]) if rounds else None
            ratio = {"ratio": speedup.value, "low": speedup.low, "high": speedup.high, "rounds": speedup.n} if speedup else \
                {"ratio": None, "low": None, "high": None, "rounds": 0}
            seen.append(name)
            results.add("stacked", "ok" if not row["error"] else "failed", _stacked_line(row, ratio), option=name,
                        **_figures(row), **ratio)
        elif kind == "timed":
            seen.append(name)
            results.add("stacked", "failed", f"{name}: {row['error'] or 'no round timed'}", option=name, **_figures(row))

    argv = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), *scale.stacked_args, "--json",
            "--rounds", str(args.rounds), "--deadline", f"{budget * 0.8:.0f}"]
    ran = run(argv, budget, args.out / "stacked.log", ROOT, on_line)
    if ran.returncode != 0:
        results.add("stacked", "timeout" if ran.timed_out else "failed", f"gpu_check.py --stacked {ran.why()}"
                    + (f" (timed: {', '.join(seen)})" if seen else " before any contender was timed"), option="process")


def _figures(row: Dict[str, Any]) -> Dict[str, Any]:
    return {k: row.get(k) for k in ("quant", "compile", "cache", "first_s", "warm_s", "cuda_warm_s", "compile_s",
                                    "peak_bytes", "weights_bytes", "latencies", "cuda_latencies")}


def _stacked_line(row: Dict[str, Any], ratio: Dict[str, Any]) -> str:
    cuda = f" (CUDA events {row['cuda_warm_s']:.3f} s)" if row["cuda_warm_s"] is not None else ""
    peak = f", peak {row['peak_bytes'] / 2**30:.1f} GiB" if row["peak_bytes"] else ""
    if ratio["ratio"] is None:
        vs = ", no round shared with eager"
    elif ratio["low"] is None:
        vs = f", {ratio['ratio']:.2f}x eager (no interval: {ratio['rounds']} rounds)"
    else:
        vs = f", {ratio['ratio']:.2f}x eager [{ratio['low']:.2f}, {ratio['high']:.2f}] over {ratio['rounds']} rounds"
    return (f"{row['name']}: {row['warm_s']:.3f} s/image{cuda}, compile {row['compile_s']:.1f} s{peak}, "
            f"weights {row['weights_bytes'] / 2**30:.2f} GiB{vs}" + (f"; then {row['error']}" if row["error"] else ""))


def families_part(args: argparse.Namespace, scale: Scale, results: Results, budget: float) -> None:
    """benchmarks/gpu_families.py --json in its own process: each phase's line as it is measured."""

    def on_line(line: str) -> None:
        try:
            row = json.loads(line)
        except ValueError:
            return
        option = f"{row['model']} {row['phase']}" if "phase" in row else row.get("model", "setup")
        results.add("families", row.get("status", "ok"), row["line"], option=option,
                    **{k: v for k, v in row.items() if k not in ("line", "status")})

    # its own deadline stops new phases early enough for the one in flight (a 32B model's compile) to end
    argv = [sys.executable, str(ROOT / "benchmarks" / "gpu_families.py"), *scale.families_args, "--json",
            "--deadline", f"{budget * 0.7:.0f}"]
    ran = run(argv, budget, args.out / "families.log", ROOT, on_line)
    if ran.returncode != 0:
        results.add("families", "timeout" if ran.timed_out else "failed", f"gpu_families.py {ran.why()}", option="process")


# --- the machine and the summary -----------------------------------------------------------------------------------

PROBE = """
import json, importlib.metadata as m, torch
def v(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return None
cuda = torch.cuda.is_available()
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "diffusers": v("diffusers"), "torchao": v("torchao"),
                  "transformers": v("transformers"), "device": torch.cuda.get_device_name() if cuda else "cpu",
                  "capability": ".".join(map(str, torch.cuda.get_device_capability())) if cuda else None,
                  "gpus": torch.cuda.device_count() if cuda else 0, "threads": torch.get_num_threads()}))
"""


def machine(args: argparse.Namespace, results: Results, clock: Clock) -> Dict[str, Any]:
    said: List[str] = []
    ran = run([sys.executable, "-c", PROBE], min(120.0, clock.left()), args.out / "machine.log", ROOT, said.append)
    info: Dict[str, Any] = json.loads(said[-1]) if ran.returncode == 0 and said else {"error": ran.why()}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
        info["driver"] = smi.stdout.strip().splitlines()[0] if smi.returncode == 0 and smi.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired):
        info["driver"] = None
    info.update(python=platform.python_version(), host=platform.node(), date=_now(), git=_git(),
                command=" ".join([Path(sys.argv[0]).name, *(args.argv or [])]))
    results.add("run", "ok" if "error" not in info else "failed", ", ".join(f"{k} {v}" for k, v in info.items()),
                option="machine", **info)
    return info


def _git() -> Optional[str]:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def write_summary(args: argparse.Namespace, info: Dict[str, Any], results: Results, spent: Dict[str, float]) -> Path:
    """OUT/summary.md: the machine, the versions, the date, then every line of every part."""
    head = [f"# hypergrid device run, {info.get('date')}", "",
            f"- command: `python benchmarks/{info.get('command')}` (scale {args.scale}, device {args.device}, "
            f"deadline {args.deadline:.0f} s)",
            f"- device: {info.get('device')} (compute capability {info.get('capability')}, {info.get('gpus')} GPU(s)), "
            f"driver {info.get('driver')}, CUDA {info.get('cuda')}",
            f"- torch {info.get('torch')}, diffusers {info.get('diffusers')}, transformers {info.get('transformers')}, "
            f"torchao {info.get('torchao')}, Python {info.get('python')}, hypergrid {info.get('git')}, host {info.get('host')}",
            ""]
    body: List[str] = []
    for part in args.parts:
        rows = [r for r in results.rows if r["part"] == part]
        counts = ", ".join(f"{n} {s}" for s, n in sorted(_count(rows).items()))
        body += [f"## {part} ({spent.get(part, 0):.0f} s; {counts or 'no line'})", ""]
        body += [f"- {r['status']}: {r['line']}" if r["line"].startswith(str(r.get("option"))) else
                 f"- {r['status']}: {r.get('option')}: {r['line']}" for r in rows]
        body.append("")
    path = args.out / "summary.md"
    path.write_text("\n".join(head + body), encoding="utf-8")
    return path


def _count(rows: List[Dict[str, Any]]) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for row in rows:
        out[row["status"]] = out.get(row["status"], 0) + 1
    return out


# --- the command ---------------------------------------------------------------------------------------------------


def parse(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for results.jsonl, summary.md and the runs")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of: {', '.join(PARTS)}")
    parser.add_argument("--device", default="cuda", help="cuda (the device run) or cpu (the rehearsal)")
    parser.add_argument("--scale", default="full", help="full (the device run) or tiny (small sizes, few steps)")
    parser.add_argument("--deadline", type=float, default=DEADLINE_S, help="seconds for the whole run (default 540)")
    parser.add_argument("--rounds", type=int, default=6, help="side-by-side rounds of retime and stacked (6: an interval)")
    parser.add_argument("--prompts", type=int, default=1, help="prompts per render cell")
    args = parser.parse_args(argv)
    args.argv = argv if argv is not None else sys.argv[1:]
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        parser.error(f"--parts {args.parts}: no such part {', '.join(unknown) or '(empty)'}; valid: {', '.join(PARTS)}")
    args.parts = [p for p in PARTS if p in parts]
    for name, value, valid in (("--device", args.device, ("cuda", "cpu")), ("--scale", args.scale, ("full", "tiny"))):
        if value not in valid:
            parser.error(f"{name} {value}: no such choice; valid: {', '.join(valid)}")
    if args.deadline <= SUMMARY_RESERVE_S + 10:
        parser.error(f"--deadline {args.deadline:g}: too short; give more than {SUMMARY_RESERVE_S + 10:g} s (default {DEADLINE_S:g})")
    if args.rounds < 6 or args.prompts < 1:
        parser.error(f"--rounds {args.rounds} --prompts {args.prompts}: need --rounds >= 6 (an interval) and --prompts >= 1")
    if args.scale == "full" and args.device != "cuda":
        parser.error(f"--scale full --device {args.device}: the full-size run needs CUDA; valid on the CPU: --device cpu "
                     "--scale tiny (the rehearsal)")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error(f"--device cuda --scale {args.scale}: no CUDA device here; run it on a GPU machine, or rehearse "
                         "on the CPU with --device cpu --scale tiny")
    problem = _unwritable(args.out)
    if problem:
        parser.error(f"--out {args.out}: {problem}; give a folder this user can write")
    args.out = args.out.resolve()
    return args


def _unwritable(out: Path) -> Optional[str]:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-probe-{os.getpid()}-{random.randrange(1 << 30)}"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        return f"cannot be written ({error.strerror or error})"
    return None


def main(argv: Optional[List[str]] = None) -> List[Dict[str, Any]]:
    args = parse(argv)
    clock = Clock(args.deadline)
    scale = scale_of(args.scale)
    results = Results(args.out)
    info = machine(args, results, clock)
    spent: Dict[str, float] = {}
    for i, part in enumerate(args.parts):
        budget = clock.share(part, args.parts[i:])
        started = time.monotonic()
        results.add("run", "ok", f"part {part}: {budget:.0f} s of the {clock.left():.0f} s left", option=part, budget_s=budget)
        try:
            if part == "render":
                RenderPart(args, scale, results, budget).go()
            elif part == "stacked":
                stacked_part(args, scale, results, budget)
            else:
                families_part(args, scale, results, budget)
        except Exception as error:  # noqa: BLE001 - this process's own fault in a part: recorded, the next part runs
            results.add(part, "failed", f"the part itself failed: {type(error).__name__}: {error}", option="part")
        spent[part] = time.monotonic() - started
        write_summary(args, info, results, spent)  # after every part: a run killed later keeps what it had
    print(f"results: {results.path}\nsummary: {write_summary(args, info, results, spent)}")
    return results.rows


if __name__ == "__main__":
    main()
