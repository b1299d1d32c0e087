"""`assess export mlflow` against a real MLflow tracking server on localhost: its own client reads every field
back; a second export changes no run count and logs no metric twice; an unreachable server writes nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from assess.cli import cli
from tests.trackers.expected import check_against_report, cells_rows, expected_metrics, expected_params, report_views


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def all_runs(uri: str, experiment: str) -> list:
    c = client(uri)
    return c.search_runs([c.get_experiment_by_name(experiment).experiment_id], max_results=1000)


@pytest.mark.slow
def test_a_sweep_in_mlflow_holds_the_report_s_numbers_and_exports_again_without_duplicates(
        scored_sweep: tuple[Path, Path], mlflow_server: str, tmp_path: Path) -> None:
    sweep, db = scored_sweep
    first = invoke("export", "mlflow", str(sweep), "--db", str(db), "--tracking-uri", mlflow_server,
                   "--experiment", "sweep-test")
    assert first.exit_code == 0, first.output
    assert first.output == (f"MLflow {mlflow_server}, experiment sweep-test: 4 run(s) created, 0 updated, "
                            "0 unchanged\n")
    runs = all_runs(mlflow_server, "sweep-test")
    (parent,) = [r for r in runs if r.data.tags["hypergrid.kind"] == "sweep"]
    cells = [r for r in runs if r.data.tags["hypergrid.kind"] == "cell"]
    views = report_views(sweep, db)
    assert len(cells) == len(views) == 3 and parent.info.run_name == sweep.name
    assert parent.data.params == {"sweep": str(sweep.resolve()), "cells": "3"}
    assert parent.data.metrics["runs/done"] == 2 and parent.data.metrics["samples"] == 12
    c = client(mlflow_server)
    report = Path(c.download_artifacts(parent.info.run_id, "report", str(tmp_path / "parent")))
    assert {p.name for p in report.iterdir()} >= {"index.html", "pareto.png", "images"}
    html = (report / "index.html").read_text()
    rows = cells_rows(db)
    for run in cells:
        view = views[run.data.params["cell_key"]]
        assert run.info.status == "FINISHED" and run.info.run_name == view.label
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.tags["hypergrid.cell_key"] == view.cell_key
        assert run.data.tags["hypergrid.command"] == view.command
        assert run.data.tags["hypergrid.is_anchor"] == str(view.is_anchor).lower()
        assert run.data.params == expected_params(view)
        assert run.data.metrics == pytest.approx(expected_metrics(view), rel=1e-12)
        check_against_report(run.data.metrics, view, html, rows[view.cell_key])
        (sheet,) = c.list_artifacts(run.info.run_id, "contact_sheet")
        png = Image.open(c.download_artifacts(run.info.run_id, sheet.path, str(tmp_path / run.info.run_id)))
        assert png.size == (32 * (1 if view.is_anchor else 2), 32 * 2)  # 2 prompts of seed 0; anchor | cell
    second = invoke("export", "mlflow", str(sweep), "--db", str(db), "--tracking-uri", mlflow_server,
                    "--experiment", "sweep-test")
    assert second.exit_code == 0 and "0 run(s) created, 0 updated, 4 unchanged" in second.output
    again = all_runs(mlflow_server, "sweep-test")
    assert sorted(r.info.run_id for r in again) == sorted(r.info.run_id for r in runs)
    for run in cells:  # nothing logged twice
        assert len(c.get_metric_history(run.info.run_id, "samples")) == 1


@pytest.mark.slow
def test_a_climb_in_mlflow_is_a_parent_run_with_one_nested_run_per_generation(
        climbed: tuple[Path, Path], mlflow_server: str) -> None:
    workdir, db = climbed
    result = invoke("export", "mlflow", "tiny-demo", "--db", str(db), "--tracking-uri", mlflow_server,
                    "--experiment", "climb-test")
    assert result.exit_code == 0, result.output
    records = [json.loads(p.read_text()) for p in
               sorted((workdir / "outputs/experiments/tiny-demo/generations").glob("g*.json"))]
    assert len(records) == 2 and "3 run(s) created" in result.output
    assert records[1]["incumbent"]["delta"] is not None  # generation 2 has an evaluated incumbent to compare
    runs = all_runs(mlflow_server, "climb-test")
    (parent,) = [r for r in runs if r.data.tags["hypergrid.kind"] == "experiment"]
    nested = sorted((r for r in runs if r.data.tags["hypergrid.kind"] == "generation"),
                    key=lambda r: int(r.data.params["generation"]))
    assert parent.data.params["quality.metric"] == "ssim" and parent.data.params["axis/steps"] == "2,4,8,12,16"
    assert parent.data.metrics["generations"] == 2
    shown = {a.path for a in client(mlflow_server).list_artifacts(parent.info.run_id, "report")}
    assert {"report/index.html", "report/frontier.png"} <= shown  # the experiment report (assess report tiny-demo)
    for run, record in zip(nested, records, strict=True):
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        inc = record["incumbent"]
        assert run.data.params["incumbent"] == " ".join(inc["overrides"])
        assert run.data.params["incumbent_status"] == inc["status"]
        assert run.data.tags["hypergrid.note"] == record["note"]
        for name in ("delta", "low", "high", "tost_p", "objective_value"):
            if inc.get(name) is not None:
                assert run.data.metrics[f"incumbent/{name}"] == pytest.approx(inc[name], rel=1e-12)
        assert run.data.metrics["budget/spent_s"] == pytest.approx(record["budget"]["spent_s"], rel=1e-12)
        (artefact,) = client(mlflow_server).list_artifacts(run.info.run_id, "generation")
        assert artefact.path == f"generation/g{record['generation']:04d}.json"
    again = invoke("export", "mlflow", "tiny-demo", "--db", str(db), "--tracking-uri", mlflow_server,
                   "--experiment", "climb-test")
    assert again.exit_code == 0 and "0 run(s) created" in again.output
    assert len(all_runs(mlflow_server, "climb-test")) == 3


@pytest.mark.slow
def test_an_unreachable_server_is_exit_2_and_nothing_is_written(scored_sweep: tuple[Path, Path],
                                                                mlflow_server: str) -> None:
    from tests.trackers.conftest import free_port

    sweep, db = scored_sweep
    dead = f"http://127.0.0.1:{free_port()}"
    result = invoke("export", "mlflow", str(sweep), "--db", str(db), "--tracking-uri", dead, "--experiment", "never")
    assert result.exit_code == 2
    assert result.output.startswith(f"Error: MLflow tracking server {dead} does not answer (")
    assert "nothing was exported" in result.output
    assert client(mlflow_server).get_experiment_by_name("never") is None


def test_a_missing_client_names_the_extra(scored_sweep: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    sweep, db = scored_sweep
    monkeypatch.setitem(sys.modules, "mlflow", None)  # what an install without the extra sees: ImportError
    result = invoke("export", "mlflow", str(sweep), "--db", str(db), "--tracking-uri", "http://127.0.0.1:1")
    assert result.exit_code == 2 and "pip install 'hypergrid[mlflow]'" in result.output


def test_a_target_that_is_neither_a_sweep_nor_an_experiment_is_exit_2(tmp_path: Path) -> None:
    result = invoke("export", "mlflow", "no-such-thing", "--tracking-uri", "http://127.0.0.1:1")
    assert result.exit_code == 2
    assert "'no-such-thing' is neither a folder nor an experiment" in result.output and "tiny-demo" in result.output


@pytest.mark.slow
def test_a_climb_s_final_is_on_the_experiment_run(climbed: tuple[Path, Path], mlflow_server: str) -> None:
    """A claimed final with its holdout renders (written through the contract module, scored for real): the
    experiment run holds its holdout speed-up and quality delta, as `assess climb --final` computes them."""
    from assess.climb.run_final import final_result
    from assess.experiment import load_experiment
    from assess.index.database import Index
    from assess.scoring.ingest import score
    from render.laws import Ledger, claim_final, final_record
    from tests.assess.climb_fixtures import ANCHOR_OVERRIDES, DemoRuns, demo_cell, holdout_ids
    from tests.assess.conftest import shift

    workdir, db = climbed
    overrides = ["steps=4", "cache=none", "scheduler=default"]
    ledger = Ledger("tiny-demo", Path("outputs"))
    claim_final(ledger, {
        "incumbent": {"cell": {"steps": "4", "cache": "none", "scheduler": "default"}, "overrides": overrides,
                      "steps": 4},
        "control": {"overrides": ["steps=4"]}, "anchor": {"overrides": ANCHOR_OVERRIDES}})
    runs = DemoRuns((workdir / "outputs").resolve(), counter=10)
    sweep = runs.sweep()
    runs.run(sweep, demo_cell(4), holdout_ids(), perturb=shift(1), latency=0.15, split="holdout", final=True)
    runs.anchor(holdout_ids(), split="holdout", final=True)
    score([sweep], db, metrics=["ssim"])
    result = invoke("export", "mlflow", "tiny-demo", "--db", str(db), "--tracking-uri", mlflow_server,
                    "--experiment", "final-test")
    assert result.exit_code == 0, result.output
    (parent,) = [r for r in all_runs(mlflow_server, "final-test") if r.data.tags["hypergrid.kind"] == "experiment"]
    with Index.open(db) as index:
        final = final_result(index, load_experiment("tiny-demo"), final_record(ledger))
    incumbent = final.arms[0]
    assert incumbent.role == "incumbent" and incumbent.speedup and incumbent.quality
    m = parent.data.metrics
    assert m["final/incumbent/speedup"] == pytest.approx(incumbent.speedup["value"], rel=1e-12)
    assert m["final/incumbent/speedup/low"] == pytest.approx(incumbent.speedup["low"], rel=1e-12)
    assert m["final/incumbent/quality"] == pytest.approx(incumbent.quality["mean"], rel=1e-12)
    assert m["final/incumbent/quality/n"] == 30
    assert parent.data.tags["hypergrid.final.incumbent"] == " ".join(overrides)
    assert parent.data.tags["hypergrid.final.parity"] == final.parity
