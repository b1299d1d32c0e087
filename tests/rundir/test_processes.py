"""The run directory's promises against real processes: killed and resumed with the sweep folder outside
out_root, two sweeps at once, SIGTERM, file modes. Each kills or races real `python -m render` runs."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from assess.status import status
from render import rundir

pytestmark = pytest.mark.slow


def start(*args: str, cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "0"}
    return subprocess.Popen([sys.executable, "-m", "render", *args, "model=tiny"], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=lambda: os.umask(0o022))


def wait_for_records(pattern: str, root: Path, n: int, process: subprocess.Popen, timeout: float = 240) -> Path:
    """The first run directory matching `pattern` once it holds `n` records (an event the renderer writes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        for samples in root.glob(pattern):
            if len(samples.read_text().splitlines()) >= n:
                return samples.parent
        time.sleep(0.05)
    raise AssertionError(f"no {pattern} reached {n} records; stderr: {process.stderr.read() if process.poll() is not None else ''}")


def rendered_per_sample(*roots: Path) -> Counter:
    """(cell key, prompt id, seed) -> how many times some process rendered it (reused samples not counted)."""
    counts: Counter = Counter()
    for root in roots:
        for run_dir in rundir.iter_run_dirs(root):
            for record in rundir.load_run(run_dir).samples:
                if record.reused_from is None:
                    counts[record.key] += 1
    return counts


SWEEP = ["-m", "steps=5,6", "prompts=dev", "prompts.limit=10", "render_anchor=false"]


def test_killed_sweep_outside_out_root_resumes_with_one_record_per_sample(tiny_cache: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / "sw"
    first = start(*SWEEP, f"hydra.sweep.dir={elsewhere}", cwd=tmp_path)
    cut = wait_for_records("0_*/samples.jsonl", elsewhere, 3, first)
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed_with = len(rundir.read_samples(cut, json.loads((cut / "run.json").read_text())["cell_key"])[0])
    assert killed_with < 10 and not (cut / "DONE.json").exists()

    again = start(*SWEEP, f"hydra.sweep.dir={elsewhere}", cwd=tmp_path)
    assert again.wait(timeout=600) == 0, again.stderr.read()
    lines = (cut / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 10, "a resumed cell holds one record per sample"
    done = json.loads((cut / "DONE.json").read_text())
    assert done["n_samples"] == 10 and done["n_rendered"] == 10 - killed_with
    assert set(rendered_per_sample(elsewhere).values()) == {1}

    other = tmp_path / "other" / "sw"
    third = start(*SWEEP, f"hydra.sweep.dir={other}", cwd=tmp_path)
    assert third.wait(timeout=600) == 0, third.stderr.read()
    assert all(json.loads(p.read_text())["n_rendered"] == 0 for p in other.glob("*/DONE.json"))
    assert set(rendered_per_sample(elsewhere, other).values()) == {1}
    assert not list(tmp_path.rglob("*.tmp")), "a temporary file was left behind"
    for path in [*elsewhere.rglob("*"), *(tmp_path / "outputs").rglob("*")]:
        if path.is_file() and ".hydra" not in path.parts and path.suffix != ".log":
            assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_two_sweeps_at_once_render_each_shared_sample_once(tiny_cache: Path, tmp_path: Path) -> None:
    a = start("-m", "steps=5,6", "prompts=dev", "prompts.limit=6", "render_anchor=false", cwd=tmp_path)
    b = start("-m", "steps=6,7", "prompts=dev", "prompts.limit=6", "render_anchor=false", cwd=tmp_path)
    assert a.wait(timeout=600) == 0, a.stderr.read()
    assert b.wait(timeout=600) == 0, b.stderr.read()
    counts = rendered_per_sample(tmp_path / "outputs")
    assert len(counts) == 18 and set(counts.values()) == {1}, "a shared sample was rendered twice"
    for sweep in (tmp_path / "outputs" / "multirun").glob("*/*"):
        assert [row.state for row in status(sweep)] == ["done", "done"]
        assert all(row.n_done == 6 for row in status(sweep))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_records_cancelled_and_exits_non_zero(tiny_cache: Path, tmp_path: Path, sig: signal.Signals) -> None:
    process = start("-m", "steps=5,6", "prompts=dev", "prompts.limit=20", "render_anchor=false", cwd=tmp_path)
    run_dir = wait_for_records("outputs/multirun/*/*/0_*/samples.jsonl", tmp_path, 1, process)
    process.send_signal(sig)
    assert process.wait(timeout=120) == 128 + sig
    failed = json.loads((run_dir / "FAILED.json").read_text())
    assert failed["category"] == "cancelled" and failed["sample"]["prompt_id"].startswith("dev-")
    assert f"received {sig.name}" in failed["message"]
    rows = status(run_dir.parent)
    (mine,) = [row for row in rows if row.path and Path(row.path).name == run_dir.name]
    assert mine.state == "failed" and mine.category == "cancelled"
    (other,) = [row for row in rows if row is not mine]
    assert other.state == "aborted", "the cell the sweep never reached must not stay pending forever"
