"""Evidence over trust (issue 28): a hash-chained ledger verified and reconciled across its copies, bound to its
experiment, the old layout migrated once; spend from an append-only log of all device work; reservations held by
every process of a launch; two text identities, each fit for its purpose; weights digests keyed on ctime and inode;
the metric model in the frozen rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from render import rundir
from render.laws import Ledger, check_rule, experiment_rule, freeze_rule, rule_in_force
from render.laws.admission import reservations, spent_gpu_seconds
from render.laws.evidence import check_evidence
from render.laws.ledger import entry_digest, genesis
from render.laws.spend import Purpose, record_spend
from tests.conftest import compose_cfg


def experiment(*overrides: str) -> object:
    return compose_cfg("experiment=tiny-demo", *overrides).experiment


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write(path: Path, entries: list[dict]) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))


# -- 1. the chain ---------------------------------------------------------------------------------


def test_each_entry_names_its_predecessor_and_carries_its_digest(tmp_path: Path) -> None:
    ledger = Ledger("tiny-demo", tmp_path)
    ledger.sync()
    freeze_rule(ledger, experiment_rule(experiment()))
    ledger.append("holdout", option="holdout", content="c", sha=[])
    chain = lines(ledger.state_copy)
    assert chain[0]["prev"] == genesis("tiny-demo")
    assert [e["prev"] for e in chain[1:]] == [e["hash"] for e in chain[:-1]]
    assert all(entry_digest(e) == e["hash"] for e in chain)
    rule = next(e for e in chain if e["kind"] == "rule")
    assert chain[-1]["bound"] == rule["digest"]  # bound to the frozen rule
    assert lines(ledger.state_copy) == lines(tmp_path / "experiments" / "tiny-demo" / "ledger.jsonl")


def test_an_edited_copy_loses_to_the_chain_and_is_reported_and_healed(tmp_path: Path) -> None:
    """The ledger's rule band edited in one copy (a user hoping for a wider band): the altered entry and what
    follows are not read, the other copy's chain wins, the edit is reported, and the next sync rewrites the copy."""
    ledger = Ledger("tiny-demo", tmp_path)
    ledger.sync()
    freeze_rule(ledger, experiment_rule(experiment()))
    chain = lines(ledger.state_copy)
    edited = [dict(e) for e in chain]
    rule = next(e for e in edited if e["kind"] == "rule")
    rule["rule"] = {**rule["rule"], "quality": {**rule["rule"]["quality"], "band": 0.5}}
    write(ledger.state_copy, edited)
    assert rule_in_force(ledger)[0]["quality"]["band"] == 0.002  # the out_root's copy, verified, wins
    problems = ledger.problems()
    assert any("altered" in p and str(ledger.state_copy) in p for p in problems), problems
    ledger.sync()
    assert lines(ledger.state_copy) == chain
    assert list(ledger.state_copy.parent.glob("ledger.jsonl.replaced-*"))  # the edited text is kept beside it


def test_an_edit_in_every_copy_is_refused_not_read(tmp_path: Path) -> None:
    """Both copies edited the same way (without recomputing the digests): the chain ends before the edit."""
    ledger = Ledger("tiny-demo", tmp_path)
    freeze_rule(ledger, experiment_rule(experiment()))
    for path in ledger.copies():
        edited = lines(path)
        edited[0]["rule"]["quality"]["band"] = 0.5
        write(path, edited)
    assert ledger.first("rule") is None
    assert any("altered" in p for p in ledger.problems())


def test_forked_copies_keep_the_longest_chain_and_report_both_versions(tmp_path: Path) -> None:
    ledger = Ledger("tiny-demo", tmp_path)
    ledger.sync()
    base = lines(ledger.state_copy)
    ledger.append("holdout", option="a", content="a", sha=[])
    ledger.append("holdout", option="b", content="b", sha=[])
    longer = lines(ledger.state_copy)
    other = ledger._chained(base, "holdout", {"option": "forked", "content": "f", "sha": []})
    write(tmp_path / "experiments" / "tiny-demo" / "ledger.jsonl", [*base, other])
    assert [e["option"] for e in ledger.entries("holdout")] == ["a", "b"]
    fork = next(p for p in ledger.problems() if "disagrees" in p)
    assert '"option": "forked"' in fork and '"option": "a"' in fork  # both versions shown
    assert lines(ledger.state_copy) == longer


def test_an_entry_of_another_experiment_or_an_unchained_line_is_not_read(tmp_path: Path) -> None:
    mine, theirs = Ledger("tiny-demo", tmp_path), Ledger("other", tmp_path)
    mine.sync()
    freeze_rule(mine, experiment_rule(experiment()))
    theirs.append("amendment", rule={"quality": {"band": 0.5}}, digest="x", reason="not mine")
    foreign = lines(theirs.state_copy)[-1]
    for path in mine.copies():
        with open(path, "a") as handle:
            handle.write(json.dumps({**foreign, "prev": lines(path)[-1]["hash"]}) + "\n")
            handle.write(json.dumps({"id": "x", "kind": "release", "rid": "r", "experiment": "tiny-demo"}) + "\n")
    assert mine.entries("amendment") == [] and mine.entries("release") == []
    assert any("belongs to experiment 'other'" in p for p in mine.problems())


def test_the_old_layout_is_migrated_once_with_its_spent_state(tmp_path: Path) -> None:
    """Unchained ledger lines and FINAL.json / final-result.json of the layout before: migrated into the chain at
    the first write, the finished final's token spent; afterwards the old files are not read."""
    folder = tmp_path / "experiments" / "tiny-demo"
    folder.mkdir(parents=True)
    write(folder / "ledger.jsonl", [{"id": "old1", "kind": "holdout", "at": "2026-11-01T00:00:00+00:00", "t": 1,
                                     "experiment": "tiny-demo", "option": "holdout", "content": "c", "sha": []}])
    (folder / "FINAL.json").write_text(json.dumps({"experiment": "tiny-demo", "claimed_at": "2026-11-30T09:44:29+00:00",
                                                   "token": "abc", "cells": []}))
    (folder / "final-result.json").write_text(json.dumps({"parity": "parity"}))
    ledger = Ledger("tiny-demo", tmp_path)
    from render.laws import token_spent

    assert ledger.first("claim")["token"] == "abc" and not token_spent(ledger, "abc")  # read as it was
    ledger.sync()
    chain = lines(ledger.state_copy)
    assert sorted(e["kind"] for e in chain[:-1]) == ["claim", "final-result", "holdout", "token-spent"]
    assert chain[-1]["kind"] == "out_root" and all(e.get("migrated") for e in chain[:-1])
    assert all("hash" in e for e in chain) and token_spent(ledger, "abc")
    (folder / "FINAL.json").write_text(json.dumps({"experiment": "tiny-demo", "token": "new", "cells": []}))
    assert ledger.first("claim")["token"] == "abc"  # migrated once: a later old-layout file is not read


def test_two_state_folders_sharing_an_out_root_append_to_one_chain(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "shared"
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "alice"))
    alice = Ledger("tiny-demo", out)
    freeze_rule(alice, experiment_rule(experiment()))
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "bob"))
    bob = Ledger("tiny-demo", out)
    with pytest.raises(Exception, match="frozen"):
        check_rule(bob, experiment_rule(experiment("experiment.quality.band=0.01")))  # Alice's rule binds Bob
    bob.append("holdout", option="bob", content="b", sha=[])
    monkeypatch.setenv("HYPERGRID_STATE", str(tmp_path / "alice"))
    assert [e["option"] for e in alice.entries("holdout")] == ["bob"]
    assert not alice.problems()


# -- 2. evidence beyond the ledger -----------------------------------------------------------------


def _run(root: Path, name: str, seconds: float, experiment_name: str = "tiny-demo", text: str = "a red circle",
         cell_key: str = "k") -> None:
    path = root / name
    rundir.atomic_write_json(path / "run.json", {
        "schema": rundir.CONTRACT_VERSION, "cell_key": cell_key, "cell": {}, "anchor": {"cell_key": "a"},
        "is_anchor": False, "prompts": {"name": "dev", "ids": ["dev-000"]}, "seeds": [0],
        "config": {"experiment": {"name": experiment_name}}})
    record = rundir.SampleRecord(cell_key=cell_key, prompt_id="dev-000", seed=0, prompt=text, image="images/x.png",
                                 width=32, height=32, latency_s=seconds, warmup=False, steps=2, s_per_step=1.0,
                                 peak_mem_bytes=1, mem_kind="cpu-rss-hwm", load_s=0.0, reused_from=None,
                                 finished_at=rundir.now_iso())
    rundir.append_record(path / "samples.jsonl", record.as_dict())


def test_a_deleted_ledger_with_runs_that_name_the_experiment_refuses_the_launch(tmp_path: Path) -> None:
    from render.laws import ExperimentGuard
    from render.laws.admission import History

    ledger = Ledger("tiny-demo", tmp_path)
    freeze_rule(ledger, experiment_rule(experiment()))
    _run(tmp_path, "runs/x", 1.0)
    check_evidence(ledger, History.scan([tmp_path]))  # a ledger and its runs: fine
    for path in ledger.copies():
        path.unlink()
    with pytest.raises(ExperimentGuard, match="1 run\\(s\\) name it"):
        check_evidence(ledger, History.scan([tmp_path]))


@pytest.mark.slow
def test_a_render_after_the_ledger_was_deleted_mid_climb_is_refused(tmp_path: Path, tiny_cache: Path) -> None:
    """The named route: the ledger's copies deleted mid-climb, then a wider band by --set: refused, nothing written."""
    from tests.conftest import run_render

    args = ["experiment=tiny-demo", "model=tiny", "prompts.limit=1", "seed=0", "steps=2"]
    first = run_render(*args, cwd=tmp_path, timeout=300)
    assert first.returncode == 0, first.stderr
    for path in [*(tmp_path / "hypergrid-state").rglob("ledger.jsonl"), *(tmp_path / "outputs").rglob("ledger.jsonl")]:
        path.unlink()
    def written() -> list[Path]:  # (the digest cache of verified images aside)
        return sorted(p for p in (tmp_path / "outputs").rglob("*") if p.is_file() and p.name != "digests.jsonl")

    before = written()
    second = run_render(*args, "experiment.quality.band=0.001", "steps=3", cwd=tmp_path, timeout=300)
    assert second.returncode == 2 and "no copy of its ledger has its frozen rule" in second.stderr, second.stderr
    assert written() == before


# -- 3. spend --------------------------------------------------------------------------------------


def test_logged_spend_stays_when_run_folders_are_deleted(tmp_path: Path) -> None:
    import shutil

    ledger = Ledger("tiny-demo", tmp_path)
    ledger.sync()
    _run(tmp_path, "runs/x", 3.0)  # a sample rendered before the log: counted from its record
    record_spend(ledger, 2.0, Purpose.SAMPLE, sample=("k2", rundir.sample_text_hash("a blue square"), 0))
    record_spend(ledger, 5.0, Purpose.MEASURE)  # a preflight measurement: no sample record at all
    record_spend(ledger, 1.5, Purpose.CALIBRATE)
    record_spend(ledger, 0.5, Purpose.FAILED)
    assert spent_gpu_seconds(ledger) == pytest.approx(12.0)
    _run(tmp_path, "runs/y", 2.0, text="a blue square", cell_key="k2")  # its sample is logged: not counted twice
    assert spent_gpu_seconds(ledger) == pytest.approx(12.0)
    shutil.rmtree(tmp_path / "runs" / "y")
    assert spent_gpu_seconds(ledger) == pytest.approx(12.0)  # deleting a run folder returns nothing
    ledger.state_copy.with_name("spend.jsonl").unlink()  # one copy of the log deleted: the other keeps it
    assert spent_gpu_seconds(ledger) == pytest.approx(12.0)


@pytest.mark.slow
def test_a_budget_refused_first_launch_records_its_preflight_measurements(tmp_path: Path, tiny_cache: Path) -> None:
    """The named route: a first launch refused by the budget measured its cells in preflight (a model load, pipeline
    calls); that device time is spent, although nothing was admitted. Each step of the measurement is admitted before
    it runs (tests/laws/test_probe_admission.py): with 0.36 ms of budget the load runs and uses it, its renders not."""
    from tests.conftest import run_render

    result = run_render("experiment=tiny-demo", "model=tiny", "seed=0", "steps=2", "experiment.budget.gpu_hours=1e-7",
                        "experiment.budget.reserve_gpu_hours=0", cwd=tmp_path, timeout=300)
    assert result.returncode == 2 and "GPU-hours" in result.stderr, result.stderr
    spend = [line for path in tmp_path.rglob("spend.jsonl") for line in lines(path)]
    assert "preflight's measurement" in result.stderr and {line["what"] for line in spend} == {Purpose.LOAD}
    assert sum(line["s"] for line in spend if line["what"] == Purpose.LOAD) > 0
    assert spent_gpu_seconds(Ledger("tiny-demo", tmp_path / "outputs")) > 0


@pytest.mark.slow
def test_a_reservation_lives_while_any_process_of_its_launch_runs(tmp_path: Path) -> None:
    """The launcher ends while a worker that inherited its reservation still renders: the reservation stays live
    (it is not released by the launcher), and the last process to end releases it."""
    from render.laws.admission import outstanding_seconds

    ledger = Ledger("tiny-demo", tmp_path)
    ledger.sync()
    state = os.environ["HYPERGRID_STATE"]
    code = f"""
import os, sys, time
os.environ["HYPERGRID_STATE"] = {state!r}
from pathlib import Path
from render.laws import Ledger
from render.laws.admission import reserve
ledger = Ledger("tiny-demo", Path({str(tmp_path)!r}))
with ledger.lock():
    reserve(ledger, 100.0)
import subprocess
worker = subprocess.Popen([sys.executable, "-c", '''
import os, sys, time
from types import SimpleNamespace
from pathlib import Path
from render.laws.admission import guard_for
from render.rundir import RunExperiment
job = SimpleNamespace(experiment=RunExperiment("tiny-demo", False, {{"gpu_hours": 1.0}}), out_root=Path({str(tmp_path)!r}))
guard_for(job)
print("joined", flush=True)
time.sleep(60)
'''], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
assert worker.stdout.readline().strip() == "joined"
print(worker.pid, flush=True)
"""
    launcher = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                              cwd=Path(__file__).parents[2])
    assert launcher.returncode == 0, launcher.stderr
    worker_pid = int(launcher.stdout.split()[-1])
    try:
        (r,) = reservations(ledger)
        assert not r.released and r.live(ledger)
        assert outstanding_seconds(ledger) == 100.0  # the launcher is gone, its worker is not
    finally:
        os.kill(worker_pid, 15)
    import time

    for _ in range(100):
        try:
            os.kill(worker_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    assert outstanding_seconds(ledger) == 0.0  # its last process is gone


# -- 4. identities ---------------------------------------------------------------------------------


def test_sample_identity_is_the_exact_text_and_holdout_identity_is_broad() -> None:
    from render.rundir import holdout_identity, sample_text_hash, shared_texts

    assert sample_text_hash("A RED CIRCLE, AT THE TOP!") != sample_text_hash("a red circle at the top")
    assert holdout_identity("A RED CIRCLE, AT THE TOP!") == holdout_identity("a red circle at the top")
    cyrillic = "\u0430 r\u0435d \u0441ircl\u0435 at the top"  # а, е, с: Cyrillic look-alikes
    assert holdout_identity(cyrillic) == holdout_identity("a red circle at the top")
    assert shared_texts([("d", "a photo of a red circle at the top, 4k")], [("h", "a red circle at the top")]) == \
        [("d", "h", "a photo of a red circle at the top, 4k")]
    assert shared_texts([("d", "a red circles")], [("h", "a red circle")]) == []  # whole phrases only


def test_a_render_of_another_casing_does_not_reuse_the_first_image(tmp_path: Path) -> None:
    """The named route: "A RED CIRCLE, AT THE TOP!" after "a red circle at the top" is another sample."""
    store = rundir.SampleStore(tmp_path)
    run = tmp_path / "runs" / "x"
    _run(tmp_path, "runs/x", 1.0, text="a red circle at the top")
    (run / "images").mkdir()
    (run / "images" / "x.png").write_bytes(b"png")
    assert store.find("k", "dev-000", "A RED CIRCLE, AT THE TOP!", 0) is None


@pytest.mark.parametrize("route", ["confusables", "inside a longer prompt", "jsonl read as txt"])
def test_the_holdout_lock_holds_by_broad_identity_in_every_reader(tmp_path: Path, route: str) -> None:
    from render.cell import build_job
    from render.laws import HoldoutLocked, check_holdout

    holdout = Path(__file__).parents[2] / "render" / "prompts" / "holdout.jsonl"
    text = json.loads(holdout.read_text().splitlines()[0])["text"]
    if route == "confusables":
        path = tmp_path / "p.txt"
        path.write_text(text.replace("a", "\u0430").replace("e", "\u0435").replace("o", "\u043e") + "\n")
        fmt = "text"
    elif route == "inside a longer prompt":
        path = tmp_path / "p.txt"
        path.write_text(f"a watercolor of {text}, trending\n")
        fmt = "text"
    else:
        path = tmp_path / "p.txt"
        path.write_text(holdout.read_text().splitlines()[0] + "\n")  # a JSON line, read as one plain-text prompt
        fmt = "text"
    cfg = compose_cfg("model=tiny", f"prompts.file={path}", f"prompts.format={fmt}", out_root=tmp_path / "out")
    job = build_job(cfg)
    with pytest.raises(HoldoutLocked, match="locked holdout"):
        check_holdout(job, cfg)


def test_the_weights_digest_is_recomputed_for_a_same_size_file_with_a_restored_mtime(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch
                                                                                   ) -> None:
    from render.rundir import folder_digest
    from render.rundir import identity

    monkeypatch.setenv("HYPERGRID_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "weights"
    folder.mkdir()
    weights = folder / "model.safetensors"
    weights.write_bytes(b"A" * 64)
    first = folder_digest(folder)
    stat = weights.stat()
    weights.write_bytes(b"B" * 64)  # same size, in place (same inode)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # mtime restored
    identity._MEMO.clear()  # another process
    assert folder_digest(folder) != first


def test_the_metric_model_chosen_by_the_environment_is_part_of_the_rule(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from render.laws import RuleChanged

    ledger = Ledger("tiny-demo", tmp_path)
    before = experiment_rule(experiment())
    freeze_rule(ledger, before)
    model = tmp_path / "my-clip"
    model.mkdir()
    (model / "config.json").write_text("{}")
    monkeypatch.setenv("HYPERGRID_CLIP_MODEL", str(model))
    changed = experiment_rule(experiment())
    assert changed["metric_models"]["HYPERGRID_CLIP_MODEL"]["identity"].startswith("sha256:")
    with pytest.raises(RuleChanged, match="metric_models"):
        check_rule(ledger, changed)


def test_every_metric_model_variable_is_one_the_rule_reads() -> None:
    from assess.metrics.alignment import CLIP
    from assess.metrics.distribution import CMMD_MODEL
    from assess.metrics.imagereward import IMAGEREWARD_MODEL
    from assess.metrics.preference import PICKSCORE_MODEL
    from render.laws.rule import METRIC_MODEL_ENV

    for model in (CLIP, CMMD_MODEL, IMAGEREWARD_MODEL, PICKSCORE_MODEL):
        assert METRIC_MODEL_ENV.fullmatch(model.env), model.env


# -- issue 30 item 5: the rule in force is the ledger's ---------------------------------------------


@pytest.mark.slow
def test_after_an_amendment_the_config_as_shipped_runs_under_the_amended_rule(tmp_path: Path) -> None:
    from render.laws import RuleChanged, amend_rule
    from render.laws.rule import budget_in_force

    ledger = Ledger("tiny-demo", tmp_path)
    freeze_rule(ledger, experiment_rule(experiment()))
    amend_rule(ledger, experiment_rule(experiment("experiment.budget.gpu_hours=9")), "more budget")
    check_rule(ledger, experiment_rule(experiment()))  # no --set needed again
    assert budget_in_force(ledger, experiment().budget).gpu_hours == 9.0
    with pytest.raises(RuleChanged):  # a change never recorded is still refused
        check_rule(ledger, experiment_rule(experiment("experiment.quality.band=0.01")))


def test_an_index_of_folded_text_identities_is_migrated_to_exact_ones(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """An index written before issue 28 keyed samples and scores by the folded text: migration 0007 recomputes both
    from the text (migration 0008 since side-by-side timing took 0007), so a rescore replaces rows instead of adding a second row for the same sample."""
    from assess.index import database as schema
    from assess.index.database import Index

    db = tmp_path / "index.db"
    with monkeypatch.context() as old:  # an index of schema 7, as an assess of then made it
        old.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:7])
        old.setattr(schema, "SCHEMA_VERSION", 7)
        index = Index.open(db)
        index.db.execute("INSERT INTO samples (cell_key, prompt_sha, prompt_id, seed, split, run_path, image, prompt, "
                         "warmup) VALUES ('c', ?, 'dev-000', 0, 'dev', '/r', 'images/x.png', 'A Red Cube!', 0)",
                         [rundir.text_hash("A Red Cube!")])
        index.db.execute("INSERT INTO scores (cell_key, prompt_sha, prompt_id, seed, metric, metric_version, value, "
                         "direction, scored_at) VALUES ('c', ?, 'dev-000', 0, 'ssim', 1, 0.9, 'higher', 'now')",
                         [rundir.text_hash("A Red Cube!")])
        index.db.conn.commit()
        index.close()
    with Index.open(db) as index:
        exact = rundir.sample_text_hash("A Red Cube!")
        assert [r["prompt_sha"] for r in index.query("SELECT prompt_sha FROM samples")] == [exact]
        assert [r["prompt_sha"] for r in index.query("SELECT prompt_sha FROM scores")] == [exact]


# -- 5. one verdict ----------------------------------------------------------------------------------


def test_the_recorded_verdict_is_found_from_a_run_and_a_band_is_a_labelled_what_if(tmp_path: Path) -> None:
    from assess.verdicts.recorded import label_what_if, recorded_verdicts
    from render.laws import claim_final, complete_final

    out = tmp_path / "outputs"
    ledger = Ledger("tiny-demo", out)
    claim = claim_final(ledger, {"cells": ["k"]})
    complete_final(ledger, claim, {"metric": "ssim", "band": 0.01, "alpha": 0.05, "parity": "parity",
                                   "arms": [{"role": "incumbent", "overrides": [], "cell_key": "k",
                                             "quality": {"verdict": "parity"}}]})
    run = out / "runs" / "x"
    record = rundir.RunRecord(3, "k", {}, rundir.AnchorRef("a"), False, rundir.PromptsRef("dev", ("p",)), (0,),
                              config={"experiment": {"name": "tiny-demo"}, "out_root": str(out)})
    rundir.atomic_write_json(run / "run.json", record.as_dict())
    recorded = recorded_verdicts([str(run)])
    assert recorded["k"]["verdict"] == "parity" and recorded["k"]["rule"]["band"] == 0.01
    what_if = label_what_if({"holdout": {"verdict": "undecided", "metric": "ssim"}}, 0.001)
    assert what_if["holdout"]["what_if"] == {"band": 0.001, "verdict": "undecided",
                                             "label": "what if: band=0.001 given on the command line, not the "
                                                      "experiment's frozen rule"}
    assert "verdict" not in what_if["holdout"]


def test_every_runs_recorded_verdict_is_found_whole_past_a_run_whose_experiment_has_no_readable_ledger(
        tmp_path: Path) -> None:
    from assess.verdicts.recorded import recorded_verdicts
    from render.laws import claim_final, complete_final

    out = tmp_path / "outputs"
    ledger = Ledger("tiny-demo", out)
    claim = claim_final(ledger, {"cells": ["k"]})
    complete_final(ledger, claim, {"metric": "ssim", "band": 0.01, "alpha": 0.05, "parity": "parity",
                                   "arms": [{"role": "incumbent", "overrides": [], "cell_key": "k",
                                             "quality": {"verdict": "parity"}}]})
    paths = []
    for folder, name in (("bad", "not a name/.."), ("good", "tiny-demo")):  # the first names no valid experiment
        record = rundir.RunRecord(3, "k", {}, rundir.AnchorRef("a"), False, rundir.PromptsRef("dev", ("p",)), (0,),
                                  config={"experiment": {"name": name}, "out_root": str(out)})
        rundir.atomic_write_json(out / "runs" / folder / "run.json", record.as_dict())
        paths.append(str(out / "runs" / folder))
    assert recorded_verdicts(paths) == {"k": {
        "verdict": "parity", "split": "holdout", "role": "incumbent", "experiment": "tiny-demo",
        "rule": {"metric": "ssim", "band": 0.01, "alpha": 0.05},
        "source": "the final's result in experiment tiny-demo's ledger"}}


def test_a_recorded_verdict_reads_with_its_split_role_rule_and_source_and_a_band_is_a_what_if_beside_it() -> None:
    from assess.verdicts.recorded import recorded_text, verdict_lines

    mine = {"verdict": "parity", "split": "holdout", "role": "incumbent", "experiment": "demo",
            "rule": {"metric": "ssim", "band": 0.01, "alpha": 0.05}, "source": "the ledger"}
    text = ("parity (recorded on the holdout as the final's incumbent, under experiment demo's frozen rule: ssim band "
            "0.01 alpha 0.05; the ledger)")
    assert recorded_text(mine) == text
    assert recorded_text({"verdict": "out"}) == ("out (recorded on the None as the final's None, under experiment "
                                                 "None's frozen rule: None band None alpha None; None)")
    lines = verdict_lines([("a", "ka"), ("b", "kb"), ("c", "kc")], {"ka": mine}, 0.02,
                          {"ka": {"dev": "out"}, "kb": {"dev": "parity"}})
    assert lines == [
        "verdicts (the recorded one under the frozen rule; a --band is a what-if beside it):",
        f"  a: verdict {text}",
        "    what if: band=0.02 given on the command line, not the experiment's frozen rule: dev: out",
        "  b: verdict none recorded (no final of an experiment decided this cell)",
        "    what if: band=0.02 given on the command line, not the experiment's frozen rule: dev: parity"]
    assert verdict_lines([("c", "kc")], {"ka": mine}) == []
    assert verdict_lines([("a", "ka")], {"ka": mine}) == ["verdicts (the recorded one under the frozen rule; a --band "
                                                          "is a what-if beside it):", f"  a: verdict {text}"]
