"""A real Prometheus (Debian's package, started by .ci/prometheus/up.sh) scrapes `assess status --serve` while
a tiny-model sweep runs, and answers a query for its done-cells count: the count `assess status` gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.trackers.conftest import PROMETHEUS_TARGET_PORT, PROMETHEUS_URL, wait_for

pytestmark = pytest.mark.prometheus


def api(path: str, **params: str) -> dict:
    url = f"{PROMETHEUS_URL}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    return body["data"]


def instant(query: str) -> float | None:
    result = api("query", query=query)["result"]
    return float(result[0]["value"][1]) if result else None


def test_prometheus_scrapes_a_running_sweep_and_answers_its_done_cells(tiny_cache: Path, tmp_path: Path) -> None:
    targets = api("targets")["activeTargets"]
    assert any(t["scrapeUrl"] == f"http://127.0.0.1:{PROMETHEUS_TARGET_PORT}/metrics" for t in targets), targets
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    sweep_process = subprocess.Popen(
        [sys.executable, "-m", "render", "-m", "model=tiny", "steps=6,8,10", "prompts=dev",
         "prompts.limit=12", "seed=[0,1]"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    exporter = None
    try:
        deadline = time.monotonic() + 120
        while not list((tmp_path / "outputs" / "multirun").glob("*/*/SWEEP.json")):
            assert sweep_process.poll() is None, sweep_process.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the sweep wrote no SWEEP.json"
            time.sleep(0.1)
        (sweep,) = (p.parent.resolve() for p in (tmp_path / "outputs" / "multirun").glob("*/*/SWEEP.json"))
        exporter = subprocess.Popen(
            [sys.executable, "-m", "assess", "status", str(sweep), "--serve", "--port", str(PROMETHEUS_TARGET_PORT)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_for(f"http://127.0.0.1:{PROMETHEUS_TARGET_PORT}/metrics", 60, exporter)
        done_query = f'hypergrid_cells{{state="done",sweep="{sweep}"}}'
        seen: list[float] = []
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline:
            value = instant(done_query)
            if value is not None:
                seen.append(value)
            if value == 3 and sweep_process.poll() is not None:
                break
            time.sleep(1)
        assert sweep_process.wait(timeout=60) == 0, sweep_process.stderr.read()[-3000:]
        assert seen and seen[-1] == 3, seen
        assert seen[0] < 3  # scraped while the sweep ran, not only after
        # the three cells ran together: the sweep renders them in rounds interleaved with their anchor
        # (render.timing.interleave), so all three were open at once
        assert instant(f'max_over_time(hypergrid_cells{{state="running",sweep="{sweep}"}}[15m])') == 3
        assert instant(f'max_over_time(hypergrid_samples_done{{sweep="{sweep}"}}[15m])') == 3 * 24
        status = subprocess.run([sys.executable, "-m", "assess", "status", str(sweep), "--json"], env=env,
                                capture_output=True, text=True, check=True)
        assert sum(r["state"] == "done" for r in json.loads(status.stdout)) == seen[-1]
    finally:
        for process in (exporter, sweep_process):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=30)
