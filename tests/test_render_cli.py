"""`python -m render` in real subprocesses: single runs, sweeps, bad inputs, skip-if-done."""

from __future__ import annotations

import json
import re
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


@pytest.mark.slow
@pytest.mark.parametrize("case", range(len(BAD_INPUTS)), ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_fails_clearly_and_writes_nothing(case: int, tmp_path: Path) -> None:
    args, message = BAD_INPUTS[case]
    args = ["-m", "model=tiny", *args[1:]] if args[:1] == ["-m"] else ["model=tiny", *args]  # -m comes first
    result = run_render(*args, cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert message in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "outputs").exists()


def test_malformed_prompt_manifest_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "mine.jsonl").write_text('{"id": "a", "text": "a cat"}\n{"id": "b"}\n')
    result = run_render("model=tiny", "prompts.file=mine.jsonl", cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and "mine.jsonl:2" in result.stderr and not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_two_sweeps_started_in_the_same_second_never_share_a_folder(tiny_cache: Path, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    command = [sys.executable, "-m", "render", "-m", "model=tiny", "steps=1", "prompts.limit=1", "render_anchor=false"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    processes = [subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(2)]
    assert all(p.wait(timeout=300) == 0 for p in processes)
    sweeps = list((tmp_path / "outputs" / "multirun").glob("*/*"))
    assert len(sweeps) == 2 and all(len(list(s.glob("*/DONE.json"))) == 1 for s in sweeps)
