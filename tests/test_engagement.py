"""Cache engagement (what each sample's cache computed and reused) and compile break-even, on the real
renderer with the shapes model: recorded per sample, indexed, said by `assess status` and `assess report`,
and read by the climb, which spends nothing on a cache that never engages."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from render.run.loader import PipelineCache
from render.run.preflight import preflight_config
from render.rundir import SampleStore
from render.run.runner import run_job
from tests.conftest import compose_cfg

SHAPES = ("device=cpu", "model=shapes", "prompts.limit=1", "render_anchor=false")


def render(root: Path, pipelines: PipelineCache, *overrides: str) -> tuple[Path, list[dict]]:
    """One shapes cell into root/runs/<cell key>: (its run directory, its sample records)."""
    job = preflight_config(compose_cfg(*SHAPES, *overrides, out_root=root))
    run_dir = root / "runs" / job.cell.key
    (result,) = run_job(job, run_dir, store=SampleStore(root), pipelines=pipelines, overrides=list(overrides))
    assert result.status == "done", result.message
    return run_dir, [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]


ENGAGING = {"fbcache": [], "pab": [], "taylorseer": [], "fastercache": []}  # each reuses work at 8 steps here


@pytest.mark.slow
@pytest.mark.parametrize("cache", list(ENGAGING))
def test_every_cache_method_counts_its_steps_and_units(cache: str, tmp_path: Path) -> None:
    _, (record,) = render(tmp_path, PipelineCache(), "steps=8", f"cache={cache}")
    assert record["steps_computed"] + record["steps_reused"] == 8  # denoising steps, whatever the CFG calls
    assert record["steps_reused"] > 0 and record["blocks_reused"] > 0 and record["blocks_computed"] > 0


@pytest.mark.slow
def test_no_cache_counts_nothing_and_the_hook_chain_is_left_as_it_was(tmp_path: Path) -> None:
    """cache=none records no counts; a cell rendered after a counted cache cell in the same process renders
    the same bytes as alone (the counter's wrappers are gone when the cache is disabled)."""
    shared = PipelineCache()
    _, (alone,) = render(tmp_path / "a", PipelineCache(), "steps=8")
    render(tmp_path / "b", shared, "steps=8", "cache=fbcache")
    _, (after,) = render(tmp_path / "b", shared, "steps=8")
    assert alone["sha256"] == after["sha256"]
    assert all(after[k] is None for k in ("steps_computed", "steps_reused", "blocks_computed", "blocks_reused"))


@pytest.mark.slow
def test_status_report_and_index_say_when_the_cache_never_engaged(tmp_path: Path) -> None:
    """The issue's sweep: fbcache (threshold 0.3) at 4 steps writes the bytes cache=none writes and reuses no
    step; at 8 steps it reuses. status, the report (HTML and printed) and the index say which is which."""
    from assess.cli import cli

    shared = PipelineCache()
    _, (plain,) = render(tmp_path, shared, "steps=4")
    _, (idle,) = render(tmp_path, shared, "steps=4", "cache=fbcache")
    _, (engaged,) = render(tmp_path, shared, "steps=8", "cache=fbcache")
    assert idle["sha256"] == plain["sha256"] and (idle["steps_computed"], idle["steps_reused"]) == (4, 0)
    assert engaged["steps_reused"] > 0
    runs, db = tmp_path / "runs", tmp_path / "index.db"
    runner = CliRunner()
    assert runner.invoke(cli, ["score", str(runs), "--db", str(db)], catch_exceptions=False).exit_code == 0
    status = runner.invoke(cli, ["status", str(runs)], catch_exceptions=False, env={"COLUMNS": "400"})
    never = "fbcache(threshold=0.3) at 4 steps: 0 of 4 steps reused, the cache never engaged"
    assert never in status.output
    assert "fbcache(threshold=0.3) at 8 steps: " in status.output and status.output.count("never engaged") == 1
    report = runner.invoke(cli, ["report", str(runs), "--db", str(db), "--out", str(tmp_path / "report")],
                           catch_exceptions=False)
    assert report.exit_code == 0, report.output
    assert never in report.output and report.output.count("never engaged") == 1
    assert never in (tmp_path / "report" / "index.html").read_text()
    with sqlite3.connect(db) as conn:
        rows = dict(conn.execute("SELECT cell_key, never_engaged FROM cache_engagement").fetchall())
    assert rows == {idle["cell_key"]: 1, engaged["cell_key"]: 0}


@pytest.mark.slow
def test_compile_break_even_against_the_eager_twin(tmp_path: Path) -> None:
    """A compiled cell's compile time (a first call that compiled from nothing: cold) and the images after
    which it pays against its eager twin, in the index's view and the report; no twin: said so."""
    from assess.cli import cli
    from assess.index.database import Index
    from assess.report.speed_notes import compile_costs

    shared = PipelineCache()
    compiled = ("steps=4", "prompts.limit=3", "compile=regional", "compile.backend=eager")
    _, records = render(tmp_path, shared, *compiled)
    assert records[0]["compile_s"] > 0 and records[0]["compile_cache_hits"] == 0
    db = tmp_path / "index.db"
    assert CliRunner().invoke(cli, ["score", str(tmp_path / "runs"), "--db", str(db)]).exit_code == 0
    with Index.open(db) as index:
        (alone,) = compile_costs(index).values()
    assert alone.cold_s == pytest.approx(records[0]["compile_s"]) and "no eager twin" in alone.note()
    _, eager = render(tmp_path, shared, "steps=4", "prompts.limit=3")
    assert CliRunner().invoke(cli, ["score", str(tmp_path / "runs"), "--db", str(db)]).exit_code == 0
    with Index.open(db) as index:
        (cost,) = compile_costs(index).values()
        row = index.query("SELECT * FROM compile_break_even")[0]
    saving = cost.eager_s - cost.compiled_s
    assert cost.eager_s is not None and row["eager_cell_key"] == eager[0]["cell_key"]
    if saving > 0:  # dynamo alone (backend eager) may be slower or faster than eager: both are worded
        assert row["break_even_cold_images"] == pytest.approx(cost.cold_s / saving)
        assert "pays after" in cost.note()
    else:
        assert row["break_even_cold_images"] is None and "never pays" in cost.note()
    report = CliRunner().invoke(cli, ["report", str(tmp_path / "runs"), "--db", str(db), "--out", str(tmp_path / "r")])
    assert cost.note() in report.output


@pytest.mark.slow
def test_counts_are_the_same_under_compile(tmp_path: Path) -> None:
    """The counter's wrappers run inside the compiled blocks' hook chain: the same counts and bytes as eager,
    and no recompilation on the next call (a new wrapper per call must not fail dynamo's guards)."""
    _, eager = render(tmp_path / "a", PipelineCache(), "steps=8", "prompts.limit=2", "cache=fbcache")
    _, compiled = render(tmp_path / "b", PipelineCache(), "steps=8", "prompts.limit=2", "cache=fbcache",
                         "compile=regional", "compile.backend=eager")
    counts = ("steps_computed", "steps_reused", "blocks_computed", "blocks_reused", "sha256")
    assert [[r[k] for k in counts] for r in compiled] == [[r[k] for k in counts] for r in eager]
    assert compiled[0]["compiled_frames"] > 0 and compiled[1]["recompiles"] == 0


@pytest.mark.slow
def test_a_second_process_compiles_from_the_warm_artefact_cache(tmp_path: Path) -> None:
    """Inductor for real: the first process compiles the cell from nothing (FX-graph cache misses: cold); a
    second process rendering another seed of it loads every graph from the artefact cache on disk (hits, no
    miss: warm, and faster); the index's compile_break_even view holds both."""
    from assess.cli import cli
    from tests.conftest import run_render

    out = tmp_path / "out"
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    firsts = []
    for seed in (0, 1):
        result = run_render("model=shapes", "device=cpu", "prompts.limit=1", "steps=4", "compile=regional",
                            f"seed={seed}", "render_anchor=false", f"out_root={out}", cwd=tmp_path, env_extra=env,
                            timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        (samples,) = [p for p in out.rglob("samples.jsonl") if json.loads(p.read_text().splitlines()[-1])["seed"] == seed]
        firsts.append(json.loads(samples.read_text().splitlines()[0]))
    cold, warm = firsts
    assert cold["compile_cache_misses"] > 0
    assert warm["compile_cache_hits"] > 0 and warm["compile_cache_misses"] == 0 and warm["compile_s"] < cold["compile_s"]
    db = tmp_path / "index.db"
    assert CliRunner().invoke(cli, ["score", str(out), "--db", str(db)], catch_exceptions=False).exit_code == 0
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT compile_cold_s, compile_warm_s FROM compile_break_even").fetchone()
    assert row == (pytest.approx(cold["compile_s"]), pytest.approx(warm["compile_s"]))
