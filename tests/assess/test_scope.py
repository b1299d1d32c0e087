"""A report, a status and a leaderboard of a sweep describe that sweep's samples, and nothing else.

Two overlapping sweeps of the tiny model (the steps=8 cell in both, other seeds, other launchers)
and a third that only reuses samples are rendered into one output root by the real renderer and
scored together; each sweep's report must count, label and time only its own samples.
"""

from __future__ import annotations

from render.rundir import cell_label

import json
import statistics
from html.parser import HTMLParser
from pathlib import Path

import pytest

from assess.index.database import Index
from assess.report.write import _fmt, write_report
from assess.scoring.ingest import score
from assess.status import format_plain, status
from tests.conftest import run_render

pytestmark = pytest.mark.slow  # renders three real sweeps (minutes): run by .ci/run with the other slow promise tests

SWEEPS = {  # name -> the render arguments
    "a": ["-m", "model=tiny", "steps=4,8", "seed=1", "prompts.limit=3"],
    "b": ["-m", "model=tiny", "steps=8,12", "seed=2", "prompts.limit=3", "hydra/launcher=gpus",
          "hydra.launcher.gpus=[0]"],
    "c": ["-m", "model=tiny", "steps=4", "seed=1", "prompts.limit=2"],  # rendered by a already: reused
}


class Rows(HTMLParser):
    """The leaderboard rows (cells' texts), the contact sheets' axes and the union banner of a report."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, object]] = []
        self.axes: list[str] = []
        self.union = False
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "tr" and "data-cell-key" in a:
            self.rows.append({**a, "cells": []})
        elif tag == "td" and self.rows and self._cell is None:
            self._cell = []
        elif tag == "table" and "data-axis" in a:
            self.axes.append(a["data-axis"])
        elif a.get("id") == "union":
            self.union = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.rows[-1]["cells"].append(" ".join("".join(self._cell).split()))  # type: ignore[union-attr]
            self._cell = None
        elif tag == "table":
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parse(html: Path) -> Rows:
    rows = Rows()
    rows.feed(html.read_text())
    return rows


@pytest.fixture(scope="module")
def rendered(tiny_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("scope")
    sweeps = {}
    for name, args in SWEEPS.items():
        before = set((root / "outputs" / "multirun").glob("*/*"))
        result = run_render(*args, cwd=root, env_extra={"HF_HUB_OFFLINE": "1"}, timing_round=True)  # labels as typed
        assert result.returncode == 0, result.stderr[-3000:]
        [sweeps[name]] = set((root / "outputs" / "multirun").glob("*/*")) - before
    sweeps["outputs"] = root / "outputs"
    score([root / "outputs"], root / "index.db", metrics=["psnr", "ssim"])
    return sweeps


def _runs(sweep: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(sweep.glob("*/run.json"))]


def _scoped(db: Path, cell_key: str, keys: set[tuple[str, int]]) -> tuple[list[dict], dict[str, list[float]]]:
    with Index.open(db, create=False) as index:
        samples = [r for r in index.query("SELECT * FROM samples WHERE cell_key = ?", (cell_key,))
                   if (r["prompt_id"], r["seed"]) in keys]
        scores = [r for r in index.query("SELECT * FROM scores WHERE cell_key = ? AND value IS NOT NULL", (cell_key,))
                  if (r["prompt_id"], r["seed"]) in keys]
    by_metric: dict[str, list[float]] = {}
    for r in scores:
        by_metric.setdefault(r["metric"], []).append(r["value"])
    return samples, by_metric


@pytest.mark.parametrize("name", ["a", "b", "c"])
def test_a_sweeps_report_covers_its_own_samples_only(rendered: dict[str, Path], name: str) -> None:
    sweep, db = rendered[name], rendered["outputs"].parent / "index.db"
    html = write_report([sweep], db)
    report = parse(html)
    runs = _runs(sweep)
    asked = {(p, s) for run in runs for p in run["prompts"]["ids"] for s in run["seeds"]}
    by_key = {row["data-cell-key"]: row for row in report.rows}
    anchor_key = runs[0]["anchor"]["cell_key"]
    assert set(by_key) == {run["cell_key"] for run in runs} | {anchor_key}
    assert not report.union and report.axes == (["steps"] if len(runs) > 1 else ["cells"])
    for run in runs:
        row = by_key[run["cell_key"]]
        keys = {(p, s) for p in run["prompts"]["ids"] for s in run["seeds"]}
        samples, values = _scoped(db, run["cell_key"], keys)
        assert (row["data-samples"], row["data-expected"]) == (str(len(keys)), str(len(keys)))
        label = row["cells"][0]
        assert f"seed={run['seeds'][0]}" in label and all(o in label for o in run["overrides"])
        line = f"python -m render model=tiny steps={run['cell']['steps']} prompts=smoke prompts.limit="
        assert f"{line}{len(run['prompts']['ids'])} seed={run['seeds'][0]}" in label
        texts = " | ".join(row["cells"])  # type: ignore[arg-type]
        warm = [s["latency_s"] for s in samples if not s["warmup"]]
        if warm:
            assert f"| {_fmt(statistics.median(warm))} |" in texts
        assert _fmt(statistics.fmean(values["psnr"])) in texts
        reused = sum(1 for s in samples if Path(s["run_path"]).parent != sweep)
        assert (f"({reused} reused†)" in texts) == (reused > 0)
    anchor = by_key[anchor_key]
    assert (anchor["data-samples"], anchor["data-expected"]) == (str(len(asked)), str(len(asked)))
    limit = len(runs[0]["prompts"]["ids"])
    label = anchor["cells"][0]  # the anchor's own command: every axis at the anchor's value, size, guidance, dtype
    for part in ("model=tiny steps=16 parallel=none attention=native scheduler=default", "cache=none compile=none",
                 f"height=32 width=32 guidance=3.5 dtype=float32 prompts=smoke prompts.limit={limit} seed="):
        assert part in label, (part, label)
    anchor_samples, _ = _scoped(db, anchor_key, asked)
    anchor_warm = [s["latency_s"] for s in anchor_samples if not s["warmup"]]
    assert f"| {_fmt(statistics.median(anchor_warm))} |" in " | ".join(anchor["cells"])  # type: ignore[arg-type]


def test_the_reusing_sweep_says_its_samples_were_rendered_elsewhere(rendered: dict[str, Path]) -> None:
    html = write_report([rendered["c"]], rendered["outputs"].parent / "index.db").read_text()
    assert "reused†" in html and "the latency of\nsuch a sample is the one measured when it was rendered" in html


def test_a_report_of_everything_is_a_union_by_cell(rendered: dict[str, Path]) -> None:
    report = parse(write_report([rendered["outputs"]], rendered["outputs"].parent / "index.db",
                                out=rendered["outputs"].parent / "union-report"))
    assert report.union
    shared = {r["cell_key"] for r in _runs(rendered["a"])} & {r["cell_key"] for r in _runs(rendered["b"])}
    [steps8] = shared
    row = next(r for r in report.rows if r["data-cell-key"] == steps8)
    assert (row["data-samples"], row["data-expected"]) == ("6", "6")  # 3 prompts x seeds 1 and 2
    assert rendered["a"].name in row["cells"][0] and rendered["b"].name in row["cells"][0]  # type: ignore[operator]


def test_status_covers_a_sweep_and_groups_everything_by_sweep(rendered: dict[str, Path]) -> None:
    for name in ("a", "b"):
        rows = status(rendered[name])
        # each cell named by its overrides (render.rundir.cell_label), as every screen names it
        assert {r.name for r in rows} == {cell_label(json.loads(p.read_text())["overrides"])
                                          for p in rendered[name].glob("*/run.json")}
        assert all(r.n_done == r.n_expected == 3 and r.sweep == str(rendered[name]) for r in rows)
    text = format_plain(status(rendered["outputs"]))
    for name in ("a", "b", "c"):
        assert f"sweep {rendered[name]}:" in text
    assert "sweep (no sweep):" in text and text.splitlines()[-1].startswith("all 4 sweep folders:")
