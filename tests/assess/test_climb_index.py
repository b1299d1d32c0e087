"""`assess climb` on an index built from run directories (written without the renderer, scored for real)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from assess.climb.observe import observe, sync_run_experiments
from assess.experiment import load_experiment
from assess.index.database import Index
from assess.scoring.ingest import score
from render.rundir import cell_key_of
from tests.assess.climb_fixtures import (
    ANCHOR_KEY,
    DemoRuns,
    demo_cell,
    dev_ids,
    holdout_ids,
    restore_hydra,  # noqa: F401  (the fixture)
)
from tests.assess.conftest import noise, shift

pytestmark = pytest.mark.usefixtures("restore_hydra")


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder: the experiment's default out_root `outputs` lies in it."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def runs(workdir: Path) -> DemoRuns:
    return DemoRuns((workdir / "outputs").resolve())


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def climb(db: Path, *extra: str):
    return invoke("climb", "tiny-demo", "--db", str(db), *extra)


def commands(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if line.startswith("  python -m render")]


def first_generation(runs: DemoRuns, db: Path) -> None:
    """Render (by hand) what generation 1 proposes, at rung 4, and score it."""
    sweep = runs.sweep()
    ids = dev_ids(4)
    runs.run(sweep, demo_cell(8), ids, perturb=shift(1), latency=0.30)
    runs.run(sweep, demo_cell(4), ids, perturb=shift(3), latency=0.15)
    runs.run(sweep, demo_cell(12), ids, perturb=shift(1), latency=0.45)
    runs.run(sweep, demo_cell(8, "fbcache"), ids, perturb=noise(2), latency=0.10)
    runs.run(sweep, demo_cell(8, "taylorseer"), ids, perturb=noise(0.6), latency=0.25)
    runs.run(sweep, demo_cell(8, scheduler="dpmpp-2m"), ids, perturb=shift(1), latency=0.31)
    runs.anchor(ids)
    score([sweep], db, metrics=["ssim"])


@pytest.mark.slow
def test_the_first_generation_on_an_empty_index(workdir: Path, db: Path) -> None:
    result = climb(db)
    assert result.exit_code == 0, result.output
    assert commands(result.output) == [
        "python -m render -m experiment=tiny-demo prompts=dev prompts.limit=4 steps=4,8,12 cache=none scheduler=default",
        "python -m render -m experiment=tiny-demo prompts=dev prompts.limit=4 steps=8 cache=fbcache,taylorseer scheduler=default",
        "python -m render -m experiment=tiny-demo prompts=dev prompts.limit=4 steps=8 cache=none scheduler=dpmpp-2m",
    ]
    assert "generation 1 (recorded in outputs/experiments/tiny-demo/generations/g0001.json)" in result.output
    record = json.loads((workdir / "outputs/experiments/tiny-demo/generations/g0001.json").read_text())
    assert record["incumbent"]["cell"] == {"steps": "8", "cache": "none", "scheduler": "default"}
    assert record["note"].startswith("g1: incumbent steps=8 cache=none scheduler=default (start); start; sweep")
    with Index.open(db) as index:
        assert index.query("SELECT number, incumbent_status, stop FROM generations") == [
            {"number": 1, "incumbent_status": "start", "stop": None}]
        assert len(index.query("SELECT * FROM generation_cells WHERE number = 1")) == 6
    again = climb(db)  # nothing rendered since: the same generation, not a new one
    assert "generation 1 (already recorded, not rendered yet" in again.output
    assert commands(again.output) == commands(result.output)
    assert not (workdir / "outputs/experiments/tiny-demo/generations/g0002.json").exists()


@pytest.mark.slow
def test_the_second_generation_promotes_and_sweeps_around_the_incumbent(runs: DemoRuns, db: Path) -> None:
    assert climb(db).exit_code == 0
    first_generation(runs, db)
    result = climb(db)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "incumbent (parity at rung 4): steps=4 cache=none scheduler=default" in out
    assert re.search(r"steps=8 cache=fbcache scheduler=default\s+4\s+4\s+-0\.0\d+ .* out ", out)
    assert commands(out) == [
        "python -m render -m experiment=tiny-demo prompts=dev prompts.limit=4 steps=4 cache=fbcache,taylorseer scheduler=default",
        "python -m render -m experiment=tiny-demo prompts=dev prompts.limit=4 steps=2 cache=none scheduler=default",
        "python -m render -m experiment=tiny-demo prompts=dev prompts.limit=4 steps=4 cache=none scheduler=dpmpp-2m",
        "python -m render -m experiment=tiny-demo prompts=dev prompts.limit=12 steps=4 cache=none scheduler=default",
        "python -m render -m experiment=tiny-demo prompts=dev prompts.limit=12 steps=8 cache=taylorseer scheduler=default",
    ]
    assert "  incumbent  steps=4 cache=none scheduler=default -> rung 12: the incumbent (parity) climbs" in out
    assert "promoted: rank 2 of 6 at rung 4 (top 2)" in out  # the anchor's own cell is no candidate


def test_unscored_samples_are_named_with_the_command_that_scores_them(runs: DemoRuns, db: Path) -> None:
    sweep = runs.sweep()
    runs.run(sweep, demo_cell(8), dev_ids(4), perturb=shift(1))
    runs.anchor(dev_ids(4))
    result = climb(db)
    assert result.exit_code == 1
    assert result.output == (f"Error: experiment tiny-demo: cells have samples without ssim scores; run `assess score "
                             f"{sweep} --metrics ssim` (or climb with --apply)\n")


@pytest.mark.slow
def test_holdout_samples_never_reach_the_navigation(runs: DemoRuns, db: Path) -> None:
    first_generation(runs, db)
    sweep = runs.sweep()
    runs.run(sweep, demo_cell(4), holdout_ids(), perturb=noise(5), split="holdout")  # much worse on the holdout
    runs.anchor(holdout_ids(), split="holdout")
    score([sweep], db, metrics=["ssim"])
    exp = load_experiment("tiny-demo")
    with Index.open(db) as index:
        sync_run_experiments(index)
        observed = observe(index, exp)
    cell = observed.cells[("4", "none", "default")]
    assert set(cell.deltas) == set(dev_ids(4)) and not set(cell.rendered) & set(holdout_ids())
    assert len(observed.holdout_runs) == 2
    result = climb(db)
    assert "incumbent (parity at rung 4): steps=4 cache=none scheduler=default" in result.output
    assert "WARNING: 2 run(s) of the holdout exist before the final" in result.output


@pytest.mark.slow
def test_the_climb_pairs_each_latency_with_its_jobs_reference_and_reads_the_noise(runs: DemoRuns, db: Path) -> None:
    sweep = runs.sweep()
    ids = dev_ids(4)
    runs.run(sweep, demo_cell(8), ids, perturb=shift(1), latency=0.30, ref_s=0.01)
    # longer per image than 8 steps, but rendered on a device twice as slow (its reference took twice as long)
    runs.run(sweep, demo_cell(4), ids, perturb=shift(1), latency=0.32, ref_s=0.02)
    runs.run(sweep, demo_cell(12), ids, perturb=shift(1), latency=0.45, ref_s=0.01, drift=0.4)
    runs.anchor(ids, ref_s=0.01)
    score([sweep], db, metrics=["ssim"])
    with Index.open(db) as index:
        sync_run_experiments(index)
        observed = observe(index, load_experiment("tiny-demo"))
    fast, eight, noisy = (observed.cells[(s, "none", "default")] for s in ("4", "8", "12"))
    assert {p: v for p, v in fast.latencies.items()} == {p: [pytest.approx(0.16)] for p in dev_ids(4)[1:]}
    assert eight.latencies[dev_ids(4)[1]] == [pytest.approx(0.30)] and eight.noise is None and eight.noisy is None
    assert noisy.noise == 0.4 and (noisy.noisy or "").startswith("noisy: ") and "drifted 40%" in (noisy.noisy or "")
    assert "incumbent (parity at rung 4): steps=4 cache=none scheduler=default" in climb(db).output


def test_a_failed_cell_is_reported_and_not_proposed_again(runs: DemoRuns, db: Path) -> None:
    sweep = runs.sweep()
    runs.run(sweep, demo_cell(8), dev_ids(4), perturb=shift(1), latency=0.3)
    runs.run(sweep, demo_cell(8, "taylorseer"), dev_ids(1), perturb=shift(1), failed="oom")
    runs.anchor(dev_ids(4))
    score([sweep], db, metrics=["ssim"])
    result = climb(db)
    assert "failed: steps=8 cache=taylorseer scheduler=default: oom: oom here" in result.output
    assert not [c for c in commands(result.output) if "taylorseer" in c and "steps=8 " in c]


def test_anchor_samples_missing_leave_scores_unavailable_with_the_reason(runs: DemoRuns, db: Path) -> None:
    sweep = runs.sweep()
    runs.run(sweep, demo_cell(8), dev_ids(4), perturb=shift(1), latency=0.3)
    runs.anchor(dev_ids(3))  # dev-003 has no anchor sample
    score([sweep], db, metrics=["ssim"])
    result = climb(db)
    assert "steps=8 cache=none scheduler=default: 1 prompt(s) without ssim: anchor sample missing" in result.output
    assert re.search(r"steps=8 cache=none scheduler=default\s+4\s+3/4 ", result.output)


def test_the_climb_stops_at_the_reserve(runs: DemoRuns, db: Path) -> None:
    first_generation(runs, db)
    result = climb(db, "--set", "experiment.budget.gpu_hours=0.0031",
                   "--set", "experiment.budget.reserve_gpu_hours=0.003")
    assert result.exit_code == 0, result.output
    assert "decision: STOP: budget: " in result.output
    assert "next: assess climb tiny-demo --final" in result.output


def test_an_unknown_experiment_lists_the_valid_ones(workdir: Path, db: Path) -> None:
    result = invoke("climb", "nope", "--db", str(db))
    assert result.exit_code == 1
    assert result.output.startswith("Error: no experiment 'nope': valid experiments are demo")


def test_a_bad_axis_value_is_named(workdir: Path, db: Path) -> None:
    result = climb(db, "--set", "experiment.axes.cache=[none,turbo]")
    assert result.exit_code == 1
    assert result.output.startswith("Error: experiment.axes.cache: turbo: no such option; valid options are "
                                    "fastercache, fbcache, magcache, none, pab, seacache, taylorseer, textkv\n")


@pytest.mark.slow
def test_the_anchor_cannot_be_an_axis(workdir: Path, db: Path) -> None:
    result = climb(db, "--set", "+experiment.axes={model.anchor.steps:[8,16]}")
    assert result.exit_code == 1
    assert result.output == ("Error: experiment.axes.model.anchor.steps: the anchor is frozen; "
                             "an experiment cannot move it\n")


@pytest.mark.slow
def test_a_bad_scalar_value_is_named(workdir: Path, db: Path) -> None:
    result = climb(db, "--set", "experiment.axes.steps=[4,many]")
    assert result.exit_code == 1
    assert result.output.startswith("Error: experiment.axes.steps: many: Value 'many' of type 'str' could not be")


@pytest.mark.slow
def test_generations_are_rebuilt_into_a_new_index_from_the_files(runs: DemoRuns, db: Path, tmp_path: Path) -> None:
    assert climb(db).exit_code == 0
    first_generation(runs, db)
    assert climb(db).exit_code == 0
    fresh = tmp_path / "fresh.db"
    score([runs.root], fresh, metrics=["ssim"])
    result = climb(fresh)
    assert "generation 2 (already recorded" in result.output
    with Index.open(fresh) as index:
        assert [r["number"] for r in index.query("SELECT number FROM generations ORDER BY number")] == [1, 2]


@pytest.mark.slow
@pytest.mark.parametrize("removed", [(), ("ledger",), ("ledger", "index"), ("ledger", "index", "result")])
def test_a_finished_final_is_shown_never_run_again(workdir: Path, db: Path, removed: tuple[str, ...]) -> None:
    from assess.climb.run_final import RESULT, FinalResult
    from render.laws import Ledger, claim_final, complete_final, final_record

    ledger = Ledger("tiny-demo", Path("outputs"))
    claim = claim_final(ledger, {"incumbent": {"cell": {}}})
    first = final_record(ledger)["at"]
    result = FinalResult("tiny-demo", first, {"steps": "4"}, "steps=4", "ssim", 0.002, 0.05, [], "parity")
    complete_final(ledger, claim, result.as_dict())  # the final finished
    for name in removed:  # evidence removed from the out_root (and the index rebuilt): the user's ledger keeps it
        target = {"ledger": workdir / "outputs/experiments/tiny-demo/ledger.jsonl", "index": db,
                  "result": workdir / "outputs/experiments/tiny-demo" / RESULT}[name]
        target.unlink(missing_ok=True)
    shown = climb(db, "--final")
    assert shown.exit_code == 0, shown.output
    assert "is complete" in shown.output and "winner: steps=4" in shown.output
    assert not (workdir / "outputs" / "multirun").exists()  # nothing rendered
    after = climb(db)  # and the climb no longer navigates
    assert after.exit_code == 1 and f"its final was claimed on {first}" in after.output


@pytest.mark.slow
def test_holdout_samples_found_before_the_final_make_it_refuse(runs: DemoRuns, db: Path, workdir: Path) -> None:
    first_generation(runs, db)
    sweep = runs.sweep()
    runs.run(sweep, demo_cell(4), holdout_ids()[:3], split="holdout")  # rendered by an older version, or by hand
    result = climb(db, "--final", "--force")
    assert result.exit_code == 1
    assert "the holdout is contaminated: 1 run folder(s) already hold samples of its texts" in result.output
    assert not (workdir / "outputs/experiments/tiny-demo/FINAL.json").exists()


@pytest.mark.slow
def test_the_final_is_refused_while_the_climb_goes_on(runs: DemoRuns, db: Path, workdir: Path) -> None:
    first_generation(runs, db)
    result = climb(db, "--final")
    assert result.exit_code == 1
    assert "the climb has not stopped (incumbent steps=4 cache=none scheduler=default, parity)" in result.output
    assert not (workdir / "outputs/experiments/tiny-demo/FINAL.json").exists()


def test_the_final_is_refused_when_its_cost_does_not_fit(runs: DemoRuns, db: Path, workdir: Path) -> None:
    first_generation(runs, db)
    result = climb(db, "--final", "--force", "--set", "experiment.budget.gpu_hours=0.004",
                   "--set", "experiment.budget.reserve_gpu_hours=0.001")
    assert result.exit_code == 1
    assert "the final needs an estimated" in result.output and "nothing was claimed" in result.output
    assert not (workdir / "outputs/experiments/tiny-demo/FINAL.json").exists()


@pytest.mark.slow
def test_the_experiment_report_names_the_winner_of_the_final(runs: DemoRuns, db: Path, workdir: Path) -> None:
    from render.laws import Ledger, claim_final

    assert climb(db).exit_code == 0
    first_generation(runs, db)
    claim_final(Ledger("tiny-demo", Path("outputs")), {
        "incumbent": {"cell": {"steps": "4", "cache": "none", "scheduler": "default"}, "steps": 4,
                      "overrides": ["steps=4", "cache=none", "scheduler=default"], "cell_key": None},
        "control": {"overrides": ["steps=4", "cache=none", "attention=native", "scheduler=default"]},
        "anchor": {"overrides": ["steps=16", "attention=native", "cache=none", "scheduler=default"]},
        "rule": {"quality": {"metric": "ssim", "band": 0.002, "alpha": 0.05}}, "commands": []})
    sweep = runs.sweep()
    hold = holdout_ids()
    runs.run(sweep, demo_cell(4), hold, perturb=shift(3), latency=0.15, split="holdout", final=True)
    runs.anchor(hold, split="holdout", final=True)
    score([sweep], db, metrics=["ssim"])
    result = invoke("report", "tiny-demo", "--db", str(db))
    assert result.exit_code == 0, result.output
    page = Path(result.output.strip())
    assert page == (workdir / "outputs/experiments/tiny-demo/report/index.html").resolve()
    html = page.read_text()
    assert "Winner: <b>steps=4 cache=none scheduler=default</b>" in html
    assert "python -m render model=tiny steps=4 cache=none scheduler=default" in html
    assert re.search(r"<td>incumbent</td>.*?<td class=\"num\">30</td>.*?parity.*?4\.00x", html, re.S)
    assert "the control is the incumbent itself" in html  # 4 steps, no cache, the anchor's settings
    assert (page.parent / "frontier.png").stat().st_size > 0
    assert html.count("<tr><td class=\"num\">") == 1  # one generation recorded (the report records none)
    with Index.open(db) as index:
        assert index.query("SELECT experiment FROM finals") == [{"experiment": "tiny-demo"}]
    # the band edited after the claim: the verdict stays the one under the rule at the claim
    from assess.climb.experiment_report import write_experiment_report

    edited = write_experiment_report("tiny-demo", db, overrides=("experiment.quality.band=0.00001",)).read_text()
    assert re.search(r"parity \(±0.002, α = 0.05, the rule at the claim\) on the holdout: <b>parity</b>", edited)


def test_an_index_of_schema_1_is_migrated_with_its_data(db: Path) -> None:
    import sqlite3

    from assess.index.database import MIGRATIONS, SCHEMA_VERSION, _split_statements

    conn = sqlite3.connect(db)
    for script in MIGRATIONS[0][1]:
        for statement in _split_statements(script):
            conn.execute(statement)
    conn.execute("INSERT INTO migrations VALUES ('0001_initial', '2026-11-01T00:00:00+00:00')")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.execute("INSERT INTO samples (cell_key, prompt_id, seed, split, run_path, image, warmup) "
                 "VALUES ('c', 'dev-000', 0, 'dev', '/r', 'images/x.png', 0)")
    conn.commit()
    conn.close()
    with Index.open(db) as index:
        assert index.schema_version() == SCHEMA_VERSION
        assert [r["name"] for r in index.query("SELECT name FROM migrations ORDER BY name")] == [
            "0001_initial", "0002_climb", "0003_text_identity", "0004_quality", "0005_timing", "0006_engagement",
            "0007_side_by_side", "0008_exact_text", "0009_clips", "0010_parity", "0011_run_identity",
            "0012_final_content", "0013_batch", "0014_stages"] == [
                m[0] for m in MIGRATIONS]
        assert index.query("SELECT cell_key, prompt_sha, category, steps_reused, ref_s FROM samples") == [
            {"cell_key": "c", "prompt_sha": "id:dev-000", "category": None, "steps_reused": None, "ref_s": None}]
        assert {"run_experiments", "generations", "generation_cells", "finals"} <= set(index.db.table_names())


@pytest.mark.slow
def test_the_report_replays_the_decision_the_climb_printed(runs: DemoRuns, db: Path, workdir: Path) -> None:
    """The report decides with the climb's own replay (its cost estimator included): a stop that only the final's
    estimated cost explains is the report's stop too."""
    from assess.climb.experiment_report import write_experiment_report

    first_generation(runs, db)
    budget = ("experiment.budget.gpu_hours=0.0031", "experiment.budget.reserve_gpu_hours=0.003")
    result = climb(db, *[arg for o in budget for arg in ("--set", o)])
    assert "decision: STOP: budget: " in result.output
    stop = re.search(r"decision: STOP: (budget: .*)", result.output).group(1)  # type: ignore[union-attr]
    from html import unescape

    page = unescape(write_experiment_report("tiny-demo", db, overrides=budget).read_text()).replace("\n", " ")
    assert f"The climb stopped: {stop}" in page


def test_a_cell_half_rescored_after_a_version_change_reads_as_partially_scored(runs: DemoRuns, db: Path) -> None:
    from assess.climb.observe import quality_deltas

    first_generation(runs, db)
    key = cell_key_of(demo_cell(4))
    with Index.open(db) as index:
        index.db.execute("UPDATE scores SET metric_version = 0, value = 0.5 WHERE cell_key = ? AND prompt_id IN "
                         "('dev-000', 'dev-001')", [key])
        exp = load_experiment("tiny-demo")
        rendered = frozenset(dev_ids(4))
        deltas, unscored, _ = quality_deltas(index, exp, key, ANCHOR_KEY, "dev", rendered)
    assert unscored == {"dev-000", "dev-001"} and set(deltas) == {"dev-002", "dev-003"}
