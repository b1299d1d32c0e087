"""benchmarks/gpu.py, the device run: its CPU rehearsal runs every part end to end (so the GPU run cannot fail on a
typo), a crash, a hang or a refusal costs one option or one part only, and bad arguments exit 2 before anything runs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import load_benchmark


def _benchmark() -> Any:
    return load_benchmark("gpu")


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.long("the real processes of every part (two render sweeps, assess score and retime, gpu_check.py "
                  "--stacked, gpu_families.py), each paying its imports: about 50 s on one quiet core")
def test_the_cpu_rehearsal_runs_every_part_and_gives_every_option_a_line(tiny_cache: Path, tmp_path: Path) -> None:
    module = _benchmark()
    out = tmp_path / "rehearsal"
    module.main(["--out", str(out), "--device", "cpu", "--scale", "tiny"])
    rows = _rows(out)
    assert {r["part"] for r in rows} == {"run", "render", "stacked", "families"}, "every part wrote lines"

    render = [r for r in rows if r["part"] == "render"]
    for option in module.options_of(module.scale_of("tiny")):
        lines = [r for r in render if r["option"] == option.label]
        assert len(lines) == 1, (option.label, lines)
        assert lines[0]["status"] == "ok" or (lines[0]["status"] in ("unavailable", "failed") and len(lines[0]["line"]) > 20), lines
    by_label = {r["option"]: r for r in render}
    for cuda_only in ("attention=flash", "attention=cudnn", "quant=fp8dq", "offload=model"):
        row = by_label[f"model=tiny {cuda_only}"]
        assert row["status"] == "unavailable" and row["line"].startswith("not available here: ") and "CUDA" in row["line"], row
    assert by_label["model=tiny cache=seacache"]["status"] == "unavailable", "a family's refusal costs that option only"
    for runs_here in ("default", "attention=sdpa-flash", "quant=int8wo", "offload=group", "cache=fbcache", "compile=regional"):
        assert by_label[f"model=tiny {runs_here}".replace(" default", "")]["status"] == "ok", runs_here
    assert by_label["assess score"]["status"] == "ok" and by_label["assess retime"]["status"] == "ok"
    retimed = [r for r in render if r["axis"] == "retime"]
    assert retimed and all(r["low"] is not None and r["low"] <= r["speedup"] <= r["high"] for r in retimed), retimed

    timed = [r for r in rows if r["part"] == "stacked" and r["option"] in
             ("eager", "regional compile", "fp8wo + compile", "fp8wo + compile + fbcache")]
    assert [r["option"] for r in timed] == ["eager", "regional compile", "fp8wo + compile", "fp8wo + compile + fbcache"]
    for row in timed:
        assert row["status"] == "ok" and row["rounds"] >= 6 and row["low"] <= row["ratio"] <= row["high"], row
        assert len(row["latencies"]) >= 6 and row["compile_s"] is not None and row["cuda_latencies"] == [], row

    families = [r for r in rows if r["part"] == "families" and "phase" in r]
    assert [(r["phase"], r["status"]) for r in families] == [
        ("eager", "ok"), ("regional compile", "ok"), ("fp8wo + regional compile", "ok")]

    summary = (out / "summary.md").read_text()
    assert "## render" in summary and "## stacked" in summary and "## families" in summary
    assert "model=tiny attention=flash: not available here" in summary and "torch " in summary


def _fake_cli(module: Any, monkeypatch: pytest.MonkeyPatch, answers: dict[str, Any]) -> list[list[str]]:
    """Each process the run starts answered by `answers[kind](argv, on_line)` (kind: probe, render, assess, stacked,
    families) instead of run: the orchestration alone, in-process."""
    calls: list[list[str]] = []

    def fake(argv: list[str], timeout: float, log: Path, cwd: Path, on_line: Any = lambda line: None) -> Any:
        calls.append(argv)
        kind = ("probe" if argv[1] == "-c" else argv[2] if argv[1] == "-m" else
                "stacked" if argv[1].endswith("gpu_check.py") else "families")
        return answers[kind](argv, on_line)

    monkeypatch.setattr(module, "run", fake)
    return calls


def test_a_part_that_hangs_is_recorded_and_the_next_part_still_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = _benchmark()
    ran = module.Ran
    answers = {
        "probe": lambda argv, on_line: (on_line(json.dumps({"torch": "x", "device": "cpu"})), ran(0, 0.1, ""))[1],
        "stacked": lambda argv, on_line: (on_line(json.dumps({"kind": "header", "line": "device=cpu"})), ran(None, 99.0, ""))[1],
        "families": lambda argv, on_line: (on_line(json.dumps({"model": "wan", "phase": "eager", "status": "ok",
                                                                 "line": "eager: 1.0 ms/step"})), ran(0, 1.0, ""))[1],
    }
    _fake_cli(module, monkeypatch, answers)
    rows = module.main(["--out", str(tmp_path / "out"), "--device", "cpu", "--scale", "tiny", "--parts", "stacked,families"])
    stacked = [r for r in rows if r["part"] == "stacked"]
    assert stacked[-1]["status"] == "timeout" and "killed at its deadline after 99 s" in stacked[-1]["line"]
    assert "before any contender was timed" in stacked[-1]["line"]
    assert [r["status"] for r in rows if r["part"] == "families"] == ["ok"]
    assert _rows(tmp_path / "out") == rows and (tmp_path / "out" / "summary.md").exists()


def test_a_render_sweep_that_crashes_loses_the_cell_in_flight_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep process that dies (a CUDA fault, a segfault): the cells it finished keep their lines, the cell it was
    rendering is recorded as crashed, and the options it had not reached run in a new sweep."""
    from render.rundir import sweep_cell, write_done, write_failed, write_sweep

    module = _benchmark()
    ran = module.Ran
    sweeps: list[list[str]] = []

    def render(argv: list[str], on_line: Any) -> Any:
        ids = next(a for a in argv if a.startswith("+gpucheck=")).split("=", 1)[1].split(",")
        sweeps.append(ids)
        sweep_dir = Path(next(a for a in argv if a.startswith("hydra.sweep.dir=")).split("=", 1)[1])
        cells = [sweep_cell(n, [f"+gpucheck={i}"], f"{n}_{i}", f"key{i}", i, 1) for n, i in enumerate(ids)]
        write_sweep(sweep_dir, "InProcessLauncher", cells)
        for n, option in enumerate(ids):
            folder = sweep_dir / f"{n}_{option}"
            folder.mkdir(parents=True)
            if option.endswith("attention-sage") and len(sweeps) == 1:
                return ran(-11, 3.0, "Segmentation fault")  # it dies here: the cells after it have no folder
            if option.endswith("attention-flash"):
                write_failed(folder, "error", "flash_attn: no kernel image is available", "Traceback ...")
            else:
                write_done(folder, n_samples=1)
        return ran(1 if any(i.endswith("attention-flash") for i in ids) else 0, 3.0, "")

    answers = {"probe": lambda argv, on_line: (on_line("{}"), ran(0, 0.1, ""))[1], "render": render,
               "assess": lambda argv, on_line: ran(0, 1.0, "") if argv[3] == "score" else (on_line("[]"), ran(0, 1.0, ""))[1]}
    _fake_cli(module, monkeypatch, answers)
    monkeypatch.setattr(module, "scale_of", lambda name: module.Scale(
        ("tiny",), {"attention": ("flash", "sage", "native"), "quant": (), "offload": (), "cache": (), "compile": ()},
        (), False, ("default",), "", (), ()))
    rows = module.main(["--out", str(tmp_path / "out"), "--device", "cpu", "--scale", "tiny", "--parts", "render"])
    status = {r["option"]: (r["status"], r["line"]) for r in rows if r["part"] == "render"}
    assert status["model=tiny attention=sage"][0] == "crashed" and "exited -11: Segmentation fault" in status["model=tiny attention=sage"][1]
    assert status["model=tiny attention=flash"] == ("failed", "error: flash_attn: no kernel image is available")
    assert status["model=tiny"][0] == status["model=tiny attention=native"][0] == "ok"
    assert sweeps == [["tiny_default", "tiny_attention-flash", "tiny_attention-sage", "tiny_attention-native"],
                      ["tiny_attention-native"]], "the second sweep runs only what the first had not reached"


def test_the_device_run_renders_the_cuda_only_axes_before_the_caches() -> None:
    """A deadline cuts the render part's last options: those are the caches, which the CPU tests run too."""
    module = _benchmark()
    axes = [option.axis for option in module.options_of(module.scale_of("full"))]
    order = list(dict.fromkeys(axes))
    assert order == ["default", "attention", "quant", "offload", "compile", "cache"], order


@pytest.mark.parametrize("argv, says", [
    (["--parts", "render,bench"], "--parts render,bench: no such part bench; valid: render, stacked, families"),
    (["--scale", "huge", "--device", "cpu"], "--scale huge: no such choice; valid: full, tiny"),
    (["--device", "cpu"], "--scale full --device cpu: the full-size run needs CUDA; valid on the CPU: --device cpu --scale tiny"),
    (["--device", "cpu", "--scale", "tiny", "--rounds", "3"], "--rounds 3 --prompts 1: need --rounds >= 6"),
])
def test_bad_arguments_exit_2_naming_the_value_and_the_valid_ones(argv: list[str], says: str, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exited:
        _benchmark().main(["--out", str(tmp_path / "out"), *argv])
    assert exited.value.code == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "out").exists(), "nothing ran, nothing was written"


def test_without_cuda_the_device_run_exits_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as exited:
        _benchmark().main(["--out", str(tmp_path / "out")])
    assert exited.value.code == 2
    assert "--device cuda --scale full: no CUDA device here" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_an_out_folder_that_cannot_be_written_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(SystemExit) as exited:
        _benchmark().main(["--out", str(tmp_path / "a-file" / "out"), "--device", "cpu", "--scale", "tiny"])
    assert exited.value.code == 2 and f"--out {tmp_path / 'a-file' / 'out'}: cannot be written" in capsys.readouterr().err


def test_the_script_finds_its_checkout_where_hypergrid_is_not_installed(tmp_path: Path) -> None:
    """The lent GPU machine has the repository but no `pip install -e .`: gpu.py imports render and assess itself
    (reading a sweep, a part's failure), so it puts its checkout on the path (found by a CPU run of
    benchmarks/gpu_device.sh's rehearsal: every part failed with `No module named 'render'`)."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu.py"
    # this venv's editable install (a finder on sys.meta_path) and the test's own paths removed: as on that machine
    uninstalled = ("import sys, runpy\n"
                   "sys.meta_path = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '')]\n"
                   "sys.path = [p for p in sys.path if 'editable' not in p and p not in ('', '.')]\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    control = subprocess.run([sys.executable, "-c", uninstalled + "import render"], cwd=tmp_path, env=env,
                             capture_output=True, text=True)
    assert control.returncode == 1 and "No module named 'render'" in control.stderr, "the control must not find render"
    found = subprocess.run([sys.executable, "-c", uninstalled + f"runpy.run_path({str(script)!r})\n"
                            "import render.rundir, assess.statistics.side_by_side"],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
    assert found.returncode == 0, found.stderr[-2000:]
