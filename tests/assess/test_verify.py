"""The check in place (docs/production.md, issue 62): `assess report` writes a sweep's fastest cell at parity as
winner.yaml with its evidence and shows the copy-paste Python; `assess verify <winner> --model <folder>` renders its
judged samples again through the renderer's own apply, compares them with the judged images and times the applied
pipeline against the anchor side by side; a tampered lever is caught, other weights are refused (exit 2).

One sweep of the tiny model (its anchor and one cached cell, two prompts) is rendered, scored and reported once for
the module, in process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from assess.cli import cli
from assess.winner.contract import read_winner
from render.app import PIPELINES
from render.cell import build_job
from render.rundir import SampleStore, load_run
from render.run.runner import run_job
from tests.conftest import compose_cfg

# slow: a sweep rendered with its anchor (16 steps), scored and reported, then each verify loads two pipelines and
# times 6 side-by-side rounds: ~30 s on two busy cores
pytestmark = pytest.mark.slow

CELL = ("model=tiny", "steps=4", "cache=fbcache", "cache.threshold=0.2")


@pytest.fixture(scope="module")
def reported(tiny_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("verify")
    given = ["device=cpu", "prompts.limit=2", "render_anchor=true", *CELL, f"out_root={out}"]
    results = run_job(build_job(compose_cfg(*given)), out / "sweep" / "fbcache", store=SampleStore(out),
                      pipelines=PIPELINES, overrides=given)
    assert all(r.status == "done" for r in results), [r.message for r in results]
    PIPELINES.clear()
    db = out / "index.db"
    run = CliRunner().invoke(cli, ["score", str(out / "sweep"), "--db", str(db)], catch_exceptions=False)
    assert run.exit_code == 0, run.output
    run = CliRunner().invoke(cli, ["report", str(out / "sweep"), "--db", str(db), "--band", "0.5", "--out",
                                   str(out / "report")], catch_exceptions=False)
    assert run.exit_code == 0, run.output
    from render.models.tiny import tiny_model_dir

    return {"out": out, "report": out / "report", "winner": out / "report" / "winner.yaml",
            "model": tiny_model_dir(tiny_cache), "report_output": Path(run.output)}


def verify(*args: str) -> Any:
    return CliRunner().invoke(cli, ["verify", *args, "--device", "cpu"], catch_exceptions=False)


def test_the_report_writes_the_fastest_cell_at_parity_as_a_winner_file_with_its_evidence(reported: dict[str, Path]) -> None:
    winner = read_winner(reported["winner"])
    run = load_run(reported["out"] / "sweep" / "fbcache")
    assert winner.cell_key == run.cell_key and winner.cell == run.cell and winner.model["weights"] == run.cell["model"]["weights"]
    assert "cache=fbcache" in winner.overrides and "cache.threshold=0.2" in winner.overrides
    e = winner.evidence
    assert (e.verdict, e.band, e.band_source, e.prompts, e.split) == ("parity", 0.5, "--band on the command line", 2, "smoke")
    assert e.quality is not None and e.quality["low"] <= e.quality["value"] <= e.quality["high"]
    assert {s.sha256 for s in winner.samples} == {s.sha256 for s in run.samples}
    assert set(winner.versions) == {"torch", "diffusers", "torchao"} and winner.source["kind"] == "sweep"
    html = (reported["report"] / "index.html").read_text()
    assert 'id="winner-python"' in html and "hypergrid.apply(pipe" in html


def test_assess_verify_confirms_the_winner_on_this_device(reported: dict[str, Path]) -> None:
    result = verify(str(reported["winner"]), "--model", str(reported["model"]))
    assert result.exit_code == 0, result.output
    assert result.output.count(": identical") == 2
    assert "speed-up over the anchor here:" in result.output and "side by side" in result.output
    assert result.output.strip().endswith("the winner holds here")


def _tampered(reported: dict[str, Path], tmp_path: Path, *, recorded_too: bool) -> Path:
    data = yaml.safe_load(reported["winner"].read_text())
    data["overrides"] = [o.replace("cache.threshold=0.2", "cache.threshold=0.9") for o in data["overrides"]]
    if recorded_too:  # a consistent forgery: the recorded cell says so too, so only the pixels can tell
        from render.rundir import cell_key_of

        data["cell"]["cache"]["threshold"] = 0.9
        data["cell_key"] = cell_key_of(data["cell"])
    path = tmp_path / "winner.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_assess_verify_refuses_a_winner_whose_threshold_was_changed_in_the_file(reported: dict[str, Path],
                                                                                 tmp_path: Path) -> None:
    result = verify(str(_tampered(reported, tmp_path, recorded_too=False)), "--model", str(reported["model"]))
    assert result.exit_code == 2, result.output
    assert "cache.threshold: 0.2 recorded, 0.9 composed" in result.output


def test_assess_verify_catches_a_changed_threshold_by_its_pixels(reported: dict[str, Path], tmp_path: Path) -> None:
    result = verify(str(_tampered(reported, tmp_path, recorded_too=True)), "--model", str(reported["model"]))
    assert result.exit_code == 1, result.output
    assert ": differs" in result.output and "its judged samples are not reproduced" in result.output


def test_assess_verify_refuses_other_weights_with_exit_2(reported: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    other = tmp_path / "other"
    shutil.copytree(reported["model"], other)
    config = next(other.rglob("transformer/config.json"))
    config.write_text(config.read_text().replace("{", '{"_note": "a fine-tune",', 1))  # other files, other identity
    result = verify(str(reported["winner"]), "--model", str(other))
    assert result.exit_code == 2, result.output
    assert "a winner for other weights" in result.output


def test_hypergrid_verify_on_the_users_pipeline_says_identical_and_times_both(reported: dict[str, Path]) -> None:
    from diffusers import FluxPipeline

    import hypergrid

    pipe = FluxPipeline.from_pretrained(reported["model"])
    pipe.set_progress_bar_config(disable=True)
    found = hypergrid.verify(pipe, reported["report"], samples=1)
    assert [s.outcome for s in found.samples] == ["identical"] and found.samples_hold
    assert found.speedup is not None and found.speedup["n"] == 6 and set(found.latencies) == {"applied", "anchor"}


@pytest.mark.parametrize("floor,exact,outcome", [(1.0, False, "within the lossless floor"), (1e-9, False, "differs"),
                                                 (1.0, True, "differs")])
def test_other_bytes_hold_within_the_lossless_floor_only_off_the_judged_device_and_versions(
        reported: dict[str, Path], floor: float, exact: bool, outcome: str) -> None:
    from dataclasses import replace

    from diffusers import FluxPipeline

    import hypergrid
    from assess.winner.verify import check_sample
    from render.rundir import cell_key_of

    winner = read_winner(reported["winner"])
    cell = {**winner.cell, "cache": {"name": "fbcache", "threshold": 0.9}}  # renders other bytes than were judged
    forged = replace(winner, cell=cell, cell_key=cell_key_of(cell),
                     overrides=[o.replace("cache.threshold=0.2", "cache.threshold=0.9") for o in winner.overrides],
                     evidence=replace(winner.evidence, floor={"metric": "ssim", "value": floor, "high": None, "n": 2,
                                                              "sibling": "attention=math"}))
    pipe = FluxPipeline.from_pretrained(reported["model"])
    pipe.set_progress_bar_config(disable=True)
    applied = hypergrid.apply(pipe, forged)
    found = check_sample(pipe, applied, winner.samples[0], forged, exact)
    assert found.outcome == outcome, found
    assert ("ssim drift" in found.detail) != exact
