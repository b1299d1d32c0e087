"""One verdict (issue 28, item 5): `assess status` (its table and --json), the sweep and experiment reports and the
exports show the verdict recorded under the experiment's frozen rule; a --band given on the command line is a
"what if" beside it, labelled as such, never in its place."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from assess.climb.run_final import Arm, FinalResult
from assess.scoring.ingest import score
from render.laws import Ledger, claim_final, complete_final
from render.rundir import cell_key_of
from tests.assess.climb_fixtures import (DemoRuns, demo_cell, dev_ids, holdout_ids,
                                         restore_hydra)  # noqa: F401  (the fixture)
from tests.assess.conftest import shift

pytestmark = pytest.mark.usefixtures("restore_hydra")
WHAT_IF = "what if: band=0.0001 given on the command line, not the experiment's frozen rule"


@pytest.fixture
def final(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A final of tiny-demo on the holdout, rendered (by the contract's writer) and scored, its result recorded in
    the ledger: the incumbent steps=4 at parity under the frozen band 0.002. Returns (its sweep, the index)."""
    monkeypatch.chdir(tmp_path)
    runs = DemoRuns((tmp_path / "outputs").resolve())
    sweep = runs.sweep()
    ids = holdout_ids(6)
    runs.run(sweep, demo_cell(4), ids, perturb=shift(3), latency=0.15, split="holdout", final=True)
    runs.anchor(ids, split="holdout", final=True)
    db = tmp_path / "index.db"
    score([sweep], db, metrics=["ssim"])
    ledger = Ledger("tiny-demo", runs.root)
    claim = claim_final(ledger, {"incumbent": {"cell": {"steps": "4"}}})
    arm = Arm("incumbent", ["steps=4"], cell_key_of(demo_cell(4)), quality={"verdict": "parity", "mean": -0.001})
    result = FinalResult("tiny-demo", claim["at"], {"steps": "4"}, "steps=4 cache=none scheduler=default", "ssim",
                         0.002, 0.05, [arm], "parity")
    complete_final(ledger, claim, result.as_dict())
    return sweep, db


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_status_shows_the_recorded_verdict_and_a_band_as_a_labelled_what_if(final: tuple[Path, Path]) -> None:
    sweep, db = final
    plain = invoke("status", str(sweep), "--db", str(db))
    assert plain.exit_code == 0, plain.output
    assert "verdict parity (recorded on the holdout as the final's incumbent, under experiment tiny-demo's frozen " \
           "rule: ssim band 0.002 alpha 0.05" in plain.output
    assert "what if" not in plain.output
    banded = invoke("status", str(sweep), "--db", str(db), "--band", "0.0001")
    assert banded.exit_code == 0, banded.output
    lines = banded.output.splitlines()
    recorded = next(i for i, line in enumerate(lines) if "verdict parity (recorded" in line)
    assert lines[recorded + 1].strip().startswith(WHAT_IF + ": holdout: ")  # beside it, labelled, not in its place


def test_the_sweep_report_shows_the_recorded_verdict_and_the_band_as_a_what_if(final: tuple[Path, Path],
                                                                               tmp_path: Path) -> None:
    sweep, db = final
    result = invoke("report", str(sweep), "--db", str(db), "--band", "0.0001", "--out", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    html = unescape((tmp_path / "r" / "index.html").read_text())
    key = cell_key_of(demo_cell(4))
    row = re.search(rf'<tr [^>]*data-verdict-key="{key}"[^>]*>(.*?)</tr>', html, re.S)
    assert row is not None and 'data-verdict="parity"' in row.group(0)
    assert "parity <span class=\"recorded\">(recorded)</span>" in row.group(1) and "what if: " in row.group(1)
    assert 'id="what-if"' in html and WHAT_IF in html


@pytest.mark.slow
def test_the_experiment_report_labels_a_command_line_band_as_a_what_if(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runs = DemoRuns((tmp_path / "outputs").resolve())
    sweep = runs.sweep()
    for steps in (4, 8):
        runs.run(sweep, demo_cell(steps), dev_ids(4), perturb=shift(1), latency=0.05 * steps)
    runs.anchor(dev_ids(4))
    db = tmp_path / "index.db"
    score([sweep], db, metrics=["ssim"])
    plain = invoke("report", "tiny-demo", "--db", str(db), "--out", str(tmp_path / "a"))
    assert plain.exit_code == 0, plain.output
    assert "what if" not in (tmp_path / "a" / "index.html").read_text()
    banded = invoke("report", "tiny-demo", "--db", str(db), "--band", "0.0001", "--out", str(tmp_path / "b"))
    assert banded.exit_code == 0, banded.output
    html = unescape((tmp_path / "b" / "index.html").read_text())
    assert WHAT_IF in html and html.count('class="what-if" data-what-if=') >= 2  # one per cell, beside its verdict


def test_a_sweep_export_tags_each_cell_with_its_recorded_verdict(final: tuple[Path, Path], tmp_path: Path) -> None:
    from assess.export.selection import sweep_runs

    sweep, db = final
    cells = {r.tags.get("hypergrid.cell_key"): r for r in sweep_runs(sweep, db, tmp_path / "work")}
    incumbent = cells[cell_key_of(demo_cell(4))]
    assert incumbent.tags["hypergrid.verdict"] == "parity"
    assert "frozen rule: ssim band 0.002" in incumbent.tags["hypergrid.verdict_source"]


@pytest.mark.slow
def test_an_experiment_export_carries_the_finals_recorded_result(final: tuple[Path, Path], tmp_path: Path) -> None:
    """The final is exported as its ledger recorded it (under the rule at its claim), not recomputed."""
    from assess.export.selection import experiment_runs

    _, db = final
    head = experiment_runs("tiny-demo", db, None, tmp_path / "work")[0]
    assert head.tags["hypergrid.final.parity"] == "parity"
    assert head.tags["hypergrid.final.incumbent"] == "steps=4 cache=none scheduler=default"
