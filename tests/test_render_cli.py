"""`python -m render` in real subprocesses: single runs, sweeps, bad inputs (all through the CLI's entry point in one
process, each way it refuses in a process of its own), skip-if-done."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import run_render


def run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("run.json"))


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_single_run_writes_a_complete_run_directory(tiny_cache: Path, tmp_path: Path) -> None:
    result = run_render("model=tiny", "steps=2", "render_anchor=false", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (run,) = run_dirs(tmp_path / "outputs")
    assert run.parents[1] == (tmp_path / "outputs" / "runs").resolve()  # outputs/runs/<day>/<time>-<4 hex>
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", run.parent.name) and re.fullmatch(r"\d{2}-\d{2}-\d{2}-[0-9a-f]{4}", run.name)
    meta = json.loads((run / "run.json").read_text())
    assert meta["cell"]["steps"] == 2 and meta["overrides"] == ["model=tiny", "steps=2", "render_anchor=false"]
    assert set(meta["versions"]) >= {"torch", "diffusers", "python"} and "revision" in meta["git"]
    assert (run / ".hydra" / "overrides.yaml").read_text().count("steps=2") == 1
    assert (run / "render.log").exists() and (run / "DONE.json").exists() and not (run / "FAILED.json").exists()
    samples = records(run)
    assert [s["prompt_id"] for s in samples] == meta["prompts"]["ids"]
    assert samples[0]["warmup"] and not any(s["warmup"] for s in samples[1:])
    assert all(s["latency_s"] > 0 and s["peak_mem_bytes"] > 0 and (run / s["image"]).is_file() for s in samples)
    assert samples[0]["load_s"] > 0 and all(s["load_s"] == 0 for s in samples[1:])


@pytest.mark.slow
def test_a_sweep_its_rerun_and_a_larger_prompt_set(tiny_cache: Path, tmp_path: Path) -> None:
    """One sweep rendered once, three promises on it (each was a test that rendered a sweep of its own): its layout
    (one cell per combination and the anchor), a rerun renders nothing and loads no model, and a larger prompt set
    renders only the new prompts."""
    args = ("-m", "model=tiny", "steps=1,2", "cache=none,fbcache", "seed=42", "prompts.limit=2")
    result = run_render(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (sweep,) = list((tmp_path / "outputs" / "multirun").glob("*/*"))
    cells = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    # a cell's folder holds the overrides that vary between cells only, not model=, seed=, prompts.limit= they share
    assert cells == ["0_cache=none,steps=1", "1_cache=fbcache,steps=1", "2_cache=none,steps=2", "3_cache=fbcache,steps=2"], \
        "the layout: one cell folder per combination, named by what varies"
    assert len(json.loads((sweep / "SWEEP.json").read_text())["cells"]) == 4, "the layout: SWEEP.json lists each cell"
    (anchor,) = [d for d in run_dirs(tmp_path / "outputs" / "anchors")]
    assert json.loads((anchor / "run.json").read_text())["is_anchor"] and len(records(anchor)) == 2, \
        "the layout: the anchor rendered once for the sweep's prompts"
    assert "4 of 4 cells done" in result.stdout, "the layout: the summary counts the cells"

    again = run_render(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    second = sorted((tmp_path / "outputs" / "multirun").glob("*/*"))[-1]
    assert second != sweep, "a rerun is a sweep folder of its own"
    for run in (d for d in second.iterdir() if d.is_dir()):
        done = json.loads((run / "DONE.json").read_text())
        assert (done["n_rendered"], done["n_reused"]) == (0, 2), f"a rerun renders nothing: {run.name} {done}"
        assert all(s["reused_from"] for s in records(run)) and all((run / s["image"]).is_file() for s in records(run)), \
            f"a rerun links every sample in: {run.name}"
        assert "loaded model" not in (run / "render.log").read_text(), f"a rerun loads no model: {run.name}"

    larger = run_render("model=tiny", "steps=1", "cache=none", "seed=42", "prompts.limit=4", "render_anchor=false", cwd=tmp_path)
    assert larger.returncode == 0, larger.stderr
    (single,) = run_dirs(tmp_path / "outputs" / "runs")
    done = json.loads((single / "DONE.json").read_text())
    assert (done["n_rendered"], done["n_reused"], done["n_samples"]) == (2, 2, 4), \
        f"a larger prompt set renders only the new prompts: {done}"


@pytest.mark.slow
def test_cell_images_do_not_depend_on_the_cells_before_it(tiny_cache: Path, tmp_path: Path) -> None:
    """In-process sweeps reuse the pipeline; resetting attention, cache and scheduler must be exact."""
    swept = run_render("-m", "model=tiny", "cache=taylorseer,none", "scheduler=dpmpp-2m,default", "attention=math,native", "steps=6", "prompts.limit=1",
                       "render_anchor=false", "out_root=a", cwd=tmp_path)
    alone = run_render("model=tiny", "cache=none", "scheduler=default", "steps=6", "prompts.limit=1", "render_anchor=false", "out_root=b", cwd=tmp_path)
    assert swept.returncode == 0 and alone.returncode == 0, swept.stderr + alone.stderr
    last = run_dirs(tmp_path / "a" / "multirun")[-1]
    assert last.name.startswith("7_") and json.loads((last / "run.json").read_text())["cell"]["attention"] == "native"
    (single,) = run_dirs(tmp_path / "b")
    image = records(single)[0]["image"]
    assert (last / image).read_bytes() == (single / image).read_bytes()


BAD_INPUTS = [
    (["steps=abc"], "steps"),
    (["stepz=4"], "stepz"),
    (["cache=turbo"], "cache=turbo: no such cache option; the cache options are fastercache, fbcache,"),
    (["cache=fbcache", "cache.threshold=high"], "threshold"),
    (["attention=flash"], "attention=flash needs a CUDA GPU"),
    (["attention=sage"], "usable here: native, math, flex"),
    (["steps=0"], "steps=0: must be positive"),
    (["seed=-1"], "seeds must be non-negative"),
    (["seed=[]"], "at least one seed"),
    (["prompts.file=missing.jsonl"], "prompts.file='missing.jsonl': no such file"),
    (["prompts.limit=0"], "prompts.limit=0"),
    (["model.id=/nonexistent/model"], "model.id=/nonexistent/model: no diffusers pipeline folder"),
    (["device=tpu"], "device='tpu': valid values are auto, cpu, cuda"),
    (["device=cuda"], "no CUDA GPU is visible"),
    (["dtype=float8"], "Invalid value 'float8', expected one of [float32, float16, bfloat16]"),  # at composition
    (["model.dtype=float8"], "Invalid value 'float8', expected one of [float32, float16, bfloat16]"),  # was ignored on CPU
    (["guidance=-1"], "guidance=-1.0: must be >= 0"),
    (["model=sdxl", "cache=fbcache"], "fbcache"),
    (["scheduler=heun"], "scheduler=heun is not available for the flux model family; valid: default, euler"),
    (["-m", "steps=2,0", "attention=native,flash"], "3 of 4 cells cannot run; nothing was launched"),
]
# Each way the CLI refuses, once in a `python -m render` process of its own: a config Hydra cannot compose (its exit
# 1 made 2 by render.__main__), a single run's preflight (the Hydra callback), a sweep's preflight (the sweeper).
REFUSAL_PATHS = {"composition": 0, "single-run preflight": 11, "sweep preflight": 19}


def cli_args(args: list[str]) -> list[str]:
    return ["-m", "model=tiny", *args[1:]] if args[:1] == ["-m"] else ["model=tiny", *args]  # -m comes first


# Every bad input through the CLI's own entry point, run as `python -m render` runs it, one after the other in one
# process: its exit code, what it wrote to stderr (file descriptor 2: Hydra's and the logger's lines too) and its
# working directory, one a case. A process each paid the interpreter, Hydra and, for some, torch and diffusers again:
# 20 processes were 13-18 s of test time on a quiet 2-core machine (more under CI's two workers), one is 5-6 s.
REFUSE_IN_ONE_PROCESS = r'''
import json, os, runpy, sys, traceback
from pathlib import Path

import render.run.preflight

root = Path(sys.argv[1])
codes = []
for i, args in enumerate(json.loads(sys.argv[2])):
    cwd = root / f"case-{i}"
    cwd.mkdir()
    os.chdir(cwd)
    render.run.preflight._PASSED.clear()  # as in a fresh process: no preflight has passed yet
    sys.argv = ["render", *args]
    with open(root / f"case-{i}.stderr", "w") as stderr:
        sys.stdout.flush(), sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(stderr.fileno(), 2)
        try:
            runpy.run_module("render", run_name="__main__", alter_sys=True)  # as `python -m render` runs it
            code = 0
        except SystemExit as exit:  # what the interpreter would make of it
            code = exit.code if isinstance(exit.code, int) else 0 if exit.code is None else 1
            if isinstance(exit.code, str):
                print(exit.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
    codes.append(code)
(root / "codes.json").write_text(json.dumps(codes))
'''


@dataclass
class Refusal:
    code: int
    stderr: str
    cwd: Path


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory) -> list[Refusal]:
    root = tmp_path_factory.mktemp("refusals")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "0",
           "HYPERGRID_STATE": str(root / "hypergrid-state")}  # the tests' private_state, which a module fixture predates
    cases = json.dumps([cli_args(args) for args, _ in BAD_INPUTS])
    done = subprocess.run([sys.executable, "-c", REFUSE_IN_ONE_PROCESS, str(root), cases], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    codes = json.loads((root / "codes.json").read_text())
    return [Refusal(code, (root / f"case-{i}.stderr").read_text(), root / f"case-{i}") for i, code in enumerate(codes)]


@pytest.mark.slow
@pytest.mark.parametrize("case", range(len(BAD_INPUTS)), ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_fails_clearly_and_writes_nothing(case: int, refusals: list[Refusal]) -> None:
    (args, message), refused = BAD_INPUTS[case], refusals[case]
    promise = f"the CLI refuses bad input ({' '.join(args)})"
    assert refused.code == 2, f"{promise} with exit 2, not {refused.code}: {refused.stderr[-2000:]}"
    assert message in refused.stderr, f"{promise} with a message that says {message!r}: {refused.stderr[-2000:]}"
    assert "Traceback" not in refused.stderr, f"{promise} without a traceback: {refused.stderr[-2000:]}"
    assert not any(refused.cwd.iterdir()), f"{promise} and writes nothing: {sorted(refused.cwd.rglob('*'))}"


@pytest.mark.slow
@pytest.mark.parametrize("case", REFUSAL_PATHS.values(), ids=REFUSAL_PATHS.keys())
def test_each_refusal_path_ends_a_real_process_with_exit_2_and_writes_nothing(case: int, tmp_path: Path) -> None:
    args, message = BAD_INPUTS[case]
    result = run_render(*cli_args(args), cwd=tmp_path, timeout=120)
    promise = f"`python -m render {' '.join(cli_args(args))}` is refused"
    assert result.returncode == 2, f"{promise} with exit 2, not {result.returncode}: {result.stderr[-2000:]}"
    assert message in result.stderr, f"{promise} with a message that says {message!r}: {result.stderr[-2000:]}"
    assert "Traceback" not in result.stderr, f"{promise} without a traceback: {result.stderr[-2000:]}"
    assert not any(tmp_path.iterdir()), f"{promise} and writes nothing: {sorted(tmp_path.rglob('*'))}"


def test_malformed_prompt_manifest_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "mine.jsonl").write_text('{"id": "a", "text": "a cat"}\n{"id": "b"}\n')
    result = run_render("model=tiny", "prompts.file=mine.jsonl", cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and "mine.jsonl:2" in result.stderr and not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_two_sweeps_started_in_the_same_second_never_share_a_folder(tiny_cache: Path, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "render", "-m", "model=tiny", "steps=1", "prompts.limit=1", "render_anchor=false"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    processes = [subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(2)]
    assert all(p.wait(timeout=300) == 0 for p in processes)
    sweeps = list((tmp_path / "outputs" / "multirun").glob("*/*"))
    assert len(sweeps) == 2 and all(len(list(s.glob("*/DONE.json"))) == 1 for s in sweeps)
