"""Scoring run directories into the index: values, idempotence, versions, failures, references."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from assess.errors import NoRunsFound, NotARunDirectory
from assess.index.database import Index
from assess.metrics import fidelity
from assess.metrics.fidelity import psnr_identical
from render import rundir
from render.rundir import load_run
from assess.scoring.ingest import render_command, score
from tests.assess.conftest import ANCHOR_KEY, PROMPTS, RunFactory, cell_key_of, expected_psnr_shift, make_cell, shift

FAST = ["psnr", "ssim"]


def rows(db: Path, sql: str, params: tuple = ()) -> list[dict]:
    with Index.open(db) as index:
        return index.query(sql, params)


def stable_scores(db: Path) -> list[tuple]:
    return [tuple(r.values()) for r in rows(
        db, "SELECT cell_key, prompt_id, seed, metric, metric_version, value, unavailable_reason, direction, config, "
            "reference_cell_key, detail FROM scores ORDER BY cell_key, prompt_id, seed, metric")]


def test_scores_have_the_known_values(sweep_with_anchor: Path, db: Path) -> None:
    summary = score([sweep_with_anchor], db, metrics=FAST)
    assert summary.runs == 4 and summary.samples == 27
    identical = rows(db, "SELECT * FROM scores WHERE cell_key = ?", (cell_key_of(make_cell(attention="sdpa")),))
    assert len(identical) == 16
    for r in identical:
        expected = psnr_identical(32 * 32 * 3) if r["metric"] == "psnr" else 1.0
        assert r["value"] == pytest.approx(expected)
        assert r["reference_cell_key"] == ANCHOR_KEY
        assert r["direction"] == "higher"
    psnr = rows(db, "SELECT value FROM scores WHERE cell_key = ? AND metric = 'psnr'", (cell_key_of(make_cell(steps=8)),))
    assert [r["value"] for r in psnr] == pytest.approx([expected_psnr_shift(10)] * 8, rel=1e-6)
    # The anchor is the reference: no reference metric is computed for it.
    assert rows(db, "SELECT count(*) AS n FROM scores WHERE cell_key = ?", (ANCHOR_KEY,))[0]["n"] == 0


def test_cell_scores_and_speed(sweep_with_anchor: Path, db: Path) -> None:
    score([sweep_with_anchor], db, metrics=FAST)
    steps8 = cell_key_of(make_cell(steps=8))
    cell = {r["metric"]: r for r in rows(db, "SELECT * FROM cell_scores WHERE cell_key = ?", (steps8,))}
    assert cell["psnr"]["value"] == pytest.approx(expected_psnr_shift(10), rel=1e-6)
    assert cell["psnr"]["n"] == 8 and cell["psnr"]["n_unavailable"] == 0
    latencies = sorted(0.05 * (1 + 0.01 * i) for i in range(1, 8))  # the first sample is warmup
    assert cell["latency_median_s"]["value"] == pytest.approx(latencies[3])
    assert cell["gpu_s"]["value"] == pytest.approx(sum(0.05 * (1 + 0.01 * i) for i in range(8)) + 1.5)
    [board] = rows(db, "SELECT * FROM leaderboard WHERE cell_key = ?", (steps8,))
    anchor_median = sorted(0.2 * (1 + 0.01 * i) for i in range(1, 8))[3]
    assert board["speedup"] == pytest.approx(anchor_median / latencies[3])
    assert board["is_anchor"] == 0 and board["status"] == "done" and board["n_samples"] == 8


def test_scoring_twice_leaves_the_same_rows(sweep_with_anchor: Path, db: Path) -> None:
    first = score([sweep_with_anchor], db, metrics=FAST)
    before = stable_scores(db)
    runs_before = rows(db, "SELECT path, cell_key, status, n_samples, gpu_s FROM runs ORDER BY path")
    second = score([sweep_with_anchor], db, metrics=FAST)
    assert stable_scores(db) == before
    assert rows(db, "SELECT path, cell_key, status, n_samples, gpu_s FROM runs ORDER BY path") == runs_before
    assert second.written == 0 and second.current == first.written


def test_a_metric_version_bump_replaces_the_old_scores(sweep_with_anchor: Path, db: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    score([sweep_with_anchor], db, metrics=["psnr"])
    n = rows(db, "SELECT count(*) AS n FROM scores")[0]["n"]
    monkeypatch.setattr(fidelity.PSNRMetric, "spec", dataclasses.replace(fidelity.PSNR, version=2))
    summary = score([sweep_with_anchor], db, metrics=["psnr"])
    assert summary.written == n
    versions = rows(db, "SELECT metric_version, count(*) AS n FROM scores GROUP BY metric_version")
    assert versions == [{"metric_version": 2, "n": n}]
    assert {r["metric_version"] for r in rows(db, "SELECT metric_version FROM cell_scores WHERE metric = 'psnr'")} == {2}


def test_a_truncated_image_flags_its_sample_and_the_rest_is_scored(outputs: RunFactory, db: Path) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep)
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(10),
                corrupt=(("smoke-002", 1),))
    summary = score([sweep], db, metrics=FAST)
    key = cell_key_of(make_cell(steps=8))
    [flagged] = rows(db, "SELECT * FROM samples WHERE problem IS NOT NULL")
    assert (flagged["cell_key"], flagged["prompt_id"], flagged["seed"]) == (key, "smoke-002", 1)
    assert flagged["problem"].startswith("image does not match its record: ") and "bytes, its record says" in flagged["problem"]
    bad = rows(db, "SELECT * FROM scores WHERE prompt_id = 'smoke-002' AND seed = 1")
    assert {r["metric"] for r in bad} == {"psnr", "ssim"}
    assert all(r["value"] is None and r["unavailable_reason"] == flagged["problem"] for r in bad)
    good = rows(db, "SELECT * FROM scores WHERE value IS NOT NULL")
    assert len(good) == 14
    assert len(summary.flagged) == 1 and "smoke-002__s1.png" in summary.flagged[0]


def test_a_corrupt_anchor_image_makes_the_reference_unavailable(outputs: RunFactory, db: Path) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep, corrupt=(("smoke-000", 0),))
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(10))
    score([sweep], db, metrics=["psnr"])
    [r] = rows(db, "SELECT * FROM scores WHERE prompt_id = 'smoke-000' AND seed = 0")
    assert r["value"] is None and r["unavailable_reason"].startswith("anchor image does not match its record: ")


def test_swapped_images_are_unavailable_never_scored(outputs: RunFactory, db: Path) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep)
    run = outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(10))
    a, b = run / "images" / "smoke-000__s0.png", run / "images" / "smoke-001__s0.png"
    swap = a.read_bytes()
    a.write_bytes(b.read_bytes())
    b.write_bytes(swap)
    score([sweep], db, metrics=["psnr"])
    swapped = rows(db, "SELECT * FROM scores WHERE cell_key = ? AND seed = 0 AND prompt_id IN ('smoke-000', 'smoke-001')",
                   (cell_key_of(make_cell(steps=8)),))
    assert len(swapped) == 2 and all(r["value"] is None and "does not match its record" in r["unavailable_reason"] for r in swapped)


@pytest.mark.parametrize("kind", ["plain folder", "sweep without runs", "missing"])
def test_not_a_run_directory_is_an_error_and_writes_nothing(outputs: RunFactory, db: Path, tmp_path: Path,
                                                            kind: str) -> None:
    if kind == "plain folder":
        target = tmp_path / "empty"
        target.mkdir()
        expected, message = NotARunDirectory, f"{target} is not a run directory (no run.json) and holds no run directory below it"
    elif kind == "sweep without runs":
        target = outputs.sweep(cells=[{"overrides": ["steps=8"]}])
        expected, message = NoRunsFound, f"sweep folder {target} has no run directories yet (no */run.json); nothing to score"
    else:
        target = tmp_path / "nope"
        expected, message = NotARunDirectory, f"{target}: no such folder"
    with pytest.raises(expected) as err:
        score([target], db, metrics=FAST)
    assert str(err.value) == message
    assert not db.exists()


def test_a_broken_run_json_is_named_and_the_other_runs_are_scored(sweep_with_anchor: Path, db: Path) -> None:
    run_json = sweep_with_anchor / "2_steps=8" / "run.json"
    data = json.loads(run_json.read_text())
    del data["anchor"]
    run_json.write_text(json.dumps(data))
    summary = score([sweep_with_anchor], db, metrics=FAST)
    assert summary.failed == [f"{run_json.parent}: InvalidRunDirectory: {run_json}: missing key(s) anchor "
                              "(see docs/run-directory.md)"]
    assert summary.runs == 3
    assert {Path(r["path"]).name for r in rows(db, "SELECT path FROM runs")} == {"0_steps=28", "1_attention=sdpa", "3_steps=4"}


def test_a_missing_anchor_names_the_command_that_renders_it(outputs: RunFactory, db: Path) -> None:
    sweep = outputs.sweep()
    outputs.run(sweep, "0_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(10))
    score([sweep], db, metrics=["psnr"])
    reasons = rows(db, "SELECT DISTINCT unavailable_reason FROM scores WHERE prompt_id = 'smoke-001' AND seed = 1")
    command = "python -m render steps=28 cache=none attention=native scheduler=default prompts=smoke 'seed=[0,1]'"
    assert reasons == [{"unavailable_reason":
                        f"anchor sample missing (cell {ANCHOR_KEY}, prompt smoke-001, seed 1); render it with: {command}"}]
    # The anchor is rendered later, in another sweep: re-scoring the cell now compares.
    other = outputs.sweep("2026-11-30/11-00-00-beef")
    outputs.anchor(other)
    score([other], db, metrics=["psnr"])
    score([sweep], db, metrics=["psnr"])
    values = rows(db, "SELECT value FROM scores WHERE cell_key = ?", (cell_key_of(make_cell(steps=8)),))
    assert [r["value"] for r in values] == pytest.approx([expected_psnr_shift(10)] * 8, rel=1e-6)


def test_render_command_quotes_hostile_overrides(outputs: RunFactory) -> None:
    sweep = outputs.sweep()
    path = outputs.run(sweep, "0_x", make_cell(steps=8), overrides=["steps=8"])
    run = load_run(path)
    run.run = dataclasses.replace(run.run, anchor=dataclasses.replace(run.run.anchor, overrides=("prompt_suffix=a'; echo foo",)))
    assert render_command(run, [1, 0, 1]) == (
        "python -m render 'prompt_suffix=a'\"'\"'; echo foo' prompts=smoke 'seed=[0,1]'")
    assert render_command(run, [3]) == "python -m render 'prompt_suffix=a'\"'\"'; echo foo' prompts=smoke seed=3"


def test_an_anchor_of_another_size_is_not_compared(outputs: RunFactory, db: Path) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep)
    small = make_cell(steps=8, size=16)
    outputs.run(sweep, "1_small", small, overrides=["steps=8", "height=16", "width=16"])
    score([sweep], db, metrics=["psnr"])
    reasons = {r["unavailable_reason"] for r in rows(db, "SELECT unavailable_reason FROM scores")}
    assert reasons == {"anchor image is 32x32, this sample is 16x16: not comparable"}


def test_reused_samples_cost_nothing_and_keep_their_rendering_run(outputs: RunFactory, db: Path) -> None:
    first = outputs.sweep("2026-11-30/10-00-00-aaaa")
    rendered = outputs.anchor(first)
    second = outputs.sweep("2026-11-30/11-00-00-bbbb")
    reusing = outputs.anchor(second, reused_from="multirun/2026-11-30/10-00-00-aaaa/0_anchor")
    score([second], db, metrics=FAST)
    score([first], db, metrics=FAST)
    score([second], db, metrics=FAST)
    by_path = {r["path"]: r for r in rows(db, "SELECT path, gpu_s, n_reused FROM runs")}
    assert by_path[str(reusing)]["gpu_s"] == 0.0 and by_path[str(reusing)]["n_reused"] == 8
    assert by_path[str(rendered)]["gpu_s"] > 1.5
    assert {r["run_path"] for r in rows(db, "SELECT run_path FROM samples")} == {str(rendered)}


def test_an_unfinished_last_line_is_skipped_and_reported(outputs: RunFactory, db: Path) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep)
    path = outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], terminal=None)
    with (path / "samples.jsonl").open("a") as f:
        f.write('{"cell_key": "x", "prompt_id": "smo')
    summary = score([sweep], db, metrics=["psnr"])
    assert len(summary.problems) == 1 and "unfinished last line skipped" in summary.problems[0]
    [run] = rows(db, "SELECT status, n_samples, problems FROM runs WHERE path = ?", (str(path),))
    assert run["status"] == "incomplete" and run["n_samples"] == 8 and len(json.loads(run["problems"])) == 1


def test_the_index_rebuilds_from_the_run_directories_alone(sweep_with_anchor: Path, db: Path, tmp_path: Path) -> None:
    score([sweep_with_anchor], db, metrics=FAST)
    before = stable_scores(db)
    cells_before = rows(db, "SELECT * FROM cells ORDER BY cell_key")
    db.unlink()
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    score([sweep_with_anchor.parent.parent.parent], db, metrics=FAST)  # the output root
    assert stable_scores(db) == before
    assert rows(db, "SELECT * FROM cells ORDER BY cell_key") == cells_before


def test_changing_the_clip_model_rescores(sweep_with_anchor: Path, db: Path, tiny_clip: Path, tmp_path: Path) -> None:
    """The CLIP model is known by its content: a copy elsewhere is the same model, other weights are not (in the
    same process too: nothing cached answers for the swapped bytes)."""
    score([sweep_with_anchor], db, metrics=["clip_score"], clip_model=str(tiny_clip))
    assert {r["config"] for r in rows(db, "SELECT config FROM scores")} == {f"model={rundir.folder_digest(tiny_clip)}"}
    assert rows(db, "SELECT count(*) AS n FROM scores WHERE value IS NULL")[0]["n"] == 0
    other = tmp_path / "clip-copy"
    shutil.copytree(tiny_clip, other)
    summary = score([sweep_with_anchor], db, metrics=["clip_score"], clip_model=str(other))
    assert summary.written == 0 and summary.current == 27  # the same weights under another path
    weights = next(other.rglob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-1] + b"\x07")
    summary = score([sweep_with_anchor], db, metrics=["clip_score"], clip_model=str(other))
    assert summary.written == 27 and summary.current == 0
    assert {r["config"] for r in rows(db, "SELECT config FROM scores")} == {f"model={rundir.folder_digest(other)}"}


def test_an_unavailable_outcome_never_replaces_a_value_unless_forced(sweep_with_anchor: Path, db: Path) -> None:
    from assess.index.database import ScoreRow
    from assess.metrics import Outcome

    score([sweep_with_anchor], db, metrics=["psnr"])
    steps8 = cell_key_of(make_cell(steps=8))
    late = ScoreRow(steps8, rundir.sample_text_hash(PROMPTS["smoke-000"]), "smoke-000", 0, fidelity.PSNR, Outcome.unavailable("anchor sample missing"), "", ANCHOR_KEY)
    query = "SELECT value, unavailable_reason FROM scores WHERE cell_key = ? AND prompt_id = 'smoke-000' AND seed = 0"
    with Index.open(db) as index:
        with index.write() as conn:  # a concurrent scorer that did not see the anchor yet
            index.write_scores(conn, [late])
        [kept] = index.query(query, (steps8,))
        assert kept["value"] == pytest.approx(expected_psnr_shift(10), rel=1e-6)
        with index.write() as conn:
            index.write_scores(conn, [late], force=True)
        assert index.query(query, (steps8,)) == [{"value": None, "unavailable_reason": "anchor sample missing"}]


def test_chunks_and_a_small_image_cache_give_the_same_scores(sweep_with_anchor: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from assess.scoring import ingest as score_module

    whole = tmp_path / "whole.db"
    score([sweep_with_anchor], whole, metrics=FAST)
    monkeypatch.setattr(score_module, "CHUNK", 3)
    monkeypatch.setattr(score_module, "CACHE_BYTES", 2 * 32 * 32 * 3)  # two anchor images at most
    chunked = tmp_path / "chunked.db"
    score([sweep_with_anchor], chunked, metrics=FAST)
    assert stable_scores(chunked) == stable_scores(whole)


def test_the_anchor_kept_outside_the_sweep_is_scored_with_it(outputs: RunFactory, db: Path) -> None:
    anchor = outputs.stored_anchor()
    sweep = outputs.sweep()
    outputs.run(sweep, "0_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(10))
    summary = score([sweep], db, metrics=["psnr"])
    assert summary.runs == 2
    with Index.open(db) as index:
        assert index.query("SELECT is_anchor FROM runs WHERE path = ?", (str(anchor),)) == [{"is_anchor": 1}]
        values = index.query("SELECT value FROM scores WHERE metric = 'psnr'")
    assert [r["value"] for r in values] == pytest.approx([expected_psnr_shift(10)] * 8, rel=1e-9)
