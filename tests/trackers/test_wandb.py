"""`assess export wandb` in offline mode: the run files read back with wandb's own protobuf schema hold every
field; a second export of unchanged numbers writes no run; an export of changed numbers resumes the same id."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from tests.trackers.expected import check_against_report, cells_rows, expected_metrics, expected_params, report_views
from tests.trackers.wandb_files import offline_runs


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def staged_report(out: Path) -> str:
    """The report's index.html as the artefact staged it (offline: the copy `wandb sync` uploads)."""
    staged = [p for p in (out / "wandb" / ".data").rglob("*") if p.is_file() and b"hypergrid report" in p.read_bytes()]
    assert len(staged) == 1, staged
    return staged[0].read_text()


@pytest.mark.slow
def test_a_sweep_as_offline_w_and_b_runs_holds_the_report_s_numbers(scored_sweep: tuple[Path, Path],
                                                                     tmp_path: Path) -> None:
    sweep, db = scored_sweep
    out = tmp_path / "wb"
    first = invoke("export", "wandb", str(sweep), "--db", str(db), "--dir", str(out), "--project", "hg-test")
    assert first.exit_code == 0, first.output
    assert first.output == f"W&B offline {out / 'wandb'}, project hg-test: 4 run(s) created, 0 updated, 0 unchanged\n"
    runs = offline_runs(out)
    (parent,) = [r for r in runs if r.job_type == "sweep"]
    cells = [r for r in runs if r.job_type == "cell"]
    views = report_views(sweep, db)
    assert len(cells) == len(views) == 3
    assert parent.name == sweep.name and parent.project == "hg-test" and parent.group == parent.run_id
    assert parent.config["sweep"] == str(sweep.resolve())
    (report,) = parent.artefacts
    assert {"report/index.html", "report/pareto.png"} <= set(report["files"])
    html_text = staged_report(out)
    rows = cells_rows(db)
    for run in cells:
        view = views[run.config["cell_key"]]
        assert run.name == view.label and run.group == parent.run_id and run.tags == ["cell"]
        assert run.config["hypergrid"]["cell_key"] == view.cell_key
        assert run.config["hypergrid"]["parent"] == parent.run_id
        assert run.config["hypergrid"]["command"] == view.command
        assert {k: v for k, v in run.config.items() if k not in ("_wandb", "hypergrid")} == expected_params(view)
        assert run.history == pytest.approx(expected_metrics(view), rel=1e-12)
        check_against_report(run.history, view, html_text, rows[view.cell_key])
        (sheet,) = run.artefacts
        assert sheet["files"] == ["contact_sheet/contact_sheet.png"] and sheet["type"] == "cell"

    second = invoke("export", "wandb", str(sweep), "--db", str(db), "--dir", str(out), "--project", "hg-test")
    assert second.exit_code == 0 and "0 run(s) created, 0 updated, 4 unchanged" in second.output
    assert len(offline_runs(out)) == 4  # no run file written again


@pytest.mark.slow
def test_changed_numbers_resume_the_same_run_id(scored_sweep: tuple[Path, Path], tmp_path: Path) -> None:
    sweep, db = scored_sweep
    out = tmp_path / "wb"
    assert invoke("export", "wandb", str(sweep), "--db", str(db), "--dir", str(out)).exit_code == 0
    ledger_path = out / "wandb" / "hypergrid-export.json"
    ledger = json.loads(ledger_path.read_text())
    key = next(iter(ledger))
    ledger_path.write_text(json.dumps({**ledger, key: "an older content"}))  # as if that run's numbers had changed
    again = invoke("export", "wandb", str(sweep), "--db", str(db), "--dir", str(out))
    assert again.exit_code == 0 and "0 run(s) created, 1 updated, 3 unchanged" in again.output
    ids = [r.run_id for r in offline_runs(out)]
    assert len(ids) == 5 and ids.count(key) == 2 and len(set(ids)) == 4  # `wandb sync` resumes one run, no new one


@pytest.mark.slow
def test_a_climb_as_offline_w_and_b_runs_groups_the_generations_under_the_experiment(
        climbed: tuple[Path, Path], tmp_path: Path) -> None:
    workdir, db = climbed
    out = tmp_path / "wb"
    result = invoke("export", "wandb", "tiny-demo", "--db", str(db), "--dir", str(out))
    assert result.exit_code == 0 and "3 run(s) created" in result.output
    runs = offline_runs(out)
    (parent,) = [r for r in runs if r.job_type == "experiment"]
    nested = sorted((r for r in runs if r.job_type == "generation"), key=lambda r: int(r.config["generation"]))
    records = [json.loads(p.read_text()) for p in
               sorted((workdir / "outputs/experiments/tiny-demo/generations").glob("g*.json"))]
    assert len(nested) == len(records) == 2 and records[1]["incumbent"]["delta"] is not None
    assert parent.config["quality.metric"] == "ssim" and parent.history["generations"] == 2
    for run, record in zip(nested, records, strict=True):
        assert run.group == parent.run_id and run.config["hypergrid"]["note"] == record["note"]
        delta = record["incumbent"].get("delta")  # generation 1 starts with no evaluation of its incumbent
        assert run.history.get("incumbent/delta") == (None if delta is None else pytest.approx(delta, rel=1e-12))
        assert run.artefacts[0]["files"] == [f"generation/g{record['generation']:04d}.json"]


@pytest.mark.slow
def test_a_missing_client_names_the_extra(scored_sweep: tuple[Path, Path], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    sweep, db = scored_sweep
    monkeypatch.setitem(sys.modules, "wandb", None)
    result = invoke("export", "wandb", str(sweep), "--db", str(db), "--dir", str(tmp_path / "wb"))
    assert result.exit_code == 2 and "pip install 'hypergrid[wandb]'" in result.output
    assert not (tmp_path / "wb").exists()


@pytest.mark.slow
def test_an_unreadable_export_ledger_is_exit_2_with_the_fix(scored_sweep: tuple[Path, Path], tmp_path: Path) -> None:
    sweep, db = scored_sweep
    ledger = tmp_path / "wb" / "wandb" / "hypergrid-export.json"
    ledger.parent.mkdir(parents=True)
    ledger.write_text("{not json")
    result = invoke("export", "wandb", str(sweep), "--db", str(db), "--dir", str(tmp_path / "wb"))
    assert result.exit_code == 2 and f"{ledger}: unreadable" in result.output and "remove it" in result.output
    assert not list((tmp_path / "wb" / "wandb").glob("offline-run-*"))
