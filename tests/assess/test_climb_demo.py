"""The demo experiment end to end, as docs/climb.md runs it: real renders of the tiny model (minutes: slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.long("the whole demo climb through the real CLI: generations, the "
                                                                "final on the holdout timed side by side, the report")]


def assess(*args: str, cwd: Path, timeout: float = 1500) -> subprocess.CompletedProcess:
    # One torch thread: on a small shared machine two threads per render stall each other (the timings, not the
    # flow, would suffer).
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYPERGRID_INDEX": str(cwd / "outputs" / "index.db"),
           "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "assess", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_demo_climbs_stops_runs_its_final_once_and_reports(tiny_cache: Path, tmp_path: Path) -> None:
    first = assess("climb", "tiny-demo", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "python -m render -m experiment=tiny-demo prompts=dev prompts.limit=4 steps=4,8,12 cache=none " \
           "scheduler=default" in first.stdout

    climb = assess("climb", "tiny-demo", "--apply", "--generations", "12", cwd=tmp_path)
    assert climb.returncode == 0, climb.stdout[-3000:] + climb.stderr[-3000:]
    assert "decision: STOP: " in climb.stdout
    records = sorted((tmp_path / "outputs/experiments/tiny-demo/generations").glob("g*.json"))
    generations = [json.loads(p.read_text()) for p in records]
    assert len(generations) >= 3
    kinds = {p["kind"] for g in generations for p in g["proposals"]}
    assert {"start", "neighbour"} <= kinds and kinds & {"promotion", "incumbent"}  # promotions happened
    assert generations[-1]["stop"] and not generations[-1]["proposals"]
    assert all("prompts=holdout" not in c for g in generations for c in g["commands"])  # dev only before the final

    final = assess("climb", "tiny-demo", "--final", "--json", cwd=tmp_path)
    assert final.returncode == 0, final.stdout[-3000:] + final.stderr[-3000:]
    result = json.loads(final.stdout)
    incumbent, control, anchor = result["arms"]
    assert (incumbent["role"], control["role"], anchor["role"]) == ("incumbent", "control", "anchor")
    assert incumbent["n_samples"] == 30 and anchor["n_samples"] == 30
    assert incumbent["speedup"]["value"] > 0 and incumbent["quality"]["n"] == 30
    # the headline: the incumbent and the anchor timed side by side on one device, the render-time figure beside it
    assert incumbent["timed"] == "side by side" and incumbent["speedup"]["note"].startswith("side by side: 20 ")
    assert incumbent["render_speedup"]["value"] > 0
    sessions = [json.loads(line) for f in (tmp_path / "outputs").rglob("timings.jsonl") for line in f.read_text().splitlines()]
    finals = {s["session"]: s for s in sessions if s["purpose"] == "final"}
    assert len(finals) == 1 and next(iter(finals.values()))["experiment"] == "tiny-demo"
    from render.laws import Ledger
    from render.laws.spend import spend_lines

    timed = [line for line in spend_lines(Ledger("tiny-demo", tmp_path / "outputs")) if line["what"] == "retime"]
    assert timed and sum(line["s"] for line in timed) >= next(iter(finals.values()))["device_s"] - 1e-3  # budgeted
    quality = incumbent["quality"]  # one pre-planned TOST at alpha on the holdout decides the verdict
    expected = "parity" if quality["tost_p"] < result["alpha"] else "out" if quality["out_p"] < result["alpha"] else "undecided"
    assert result["parity"] == quality["verdict"] == expected

    again = assess("climb", "tiny-demo", "--final", "--json", cwd=tmp_path)  # shown from the ledger, never run again
    assert again.returncode == 0 and "nothing is rendered" in again.stderr
    assert json.loads(again.stdout)["parity"] == result["parity"]
    after = assess("climb", "tiny-demo", cwd=tmp_path)
    assert after.returncode == 1 and "is over: its final was claimed on" in after.stderr

    report = assess("report", "tiny-demo", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    html = Path(report.stdout.strip()).read_text()
    assert f"Winner: <b>{result['incumbent_line']}</b>" in html
    assert html.count('<tr><td class="num">') == len(generations)
