"""A sweep killed with SIGKILL and started again renders only the missing samples."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from PIL import Image

ARGS = ["-m", "steps=30,31", "prompts=dev", "prompts.limit=12", "render_anchor=false"]


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_sigkill_mid_sweep_then_resume_renders_only_the_missing_samples(tiny_cache: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([sys.executable, "-m", "render", *ARGS], cwd=tmp_path, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    first = None
    while time.monotonic() < deadline and process.poll() is None:
        found = list(tmp_path.glob("outputs/multirun/*/*/0_*/samples.jsonl"))
        if found and lines(found[0]) >= 3:
            first = found[0].parent
            break
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert first is not None, "the sweep never started rendering"
    killed_with = lines(first / "samples.jsonl")
    assert killed_with < 12 and not (first / "DONE.json").exists() and not (first / "FAILED.json").exists()

    again = subprocess.run([sys.executable, "-m", "render", *ARGS], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    second = sorted(tmp_path.glob("outputs/multirun/*/*"))[-1]
    done = [json.loads((run / "DONE.json").read_text()) for run in sorted(p for p in second.iterdir() if p.is_dir())]
    assert done[0]["n_reused"] == killed_with and done[0]["n_rendered"] == 12 - killed_with
    assert done[1]["n_rendered"] + done[1]["n_reused"] == 12
    for run in [first, *second.iterdir()]:
        if not run.is_dir():
            continue
        for line in (run / "samples.jsonl").read_text().splitlines():
            record = json.loads(line)  # no torn record
            Image.open(run / record["image"]).load()  # no truncated image
    assert not list(tmp_path.rglob("*.tmp")), "a temporary file was left behind"
