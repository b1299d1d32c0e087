"""One ledger per experiment: copies in the user's state and every out_root, the frozen decision rule and its
amendments, the final found from any folder, its token spent, the budget across out_roots and launchers."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from render import rundir
from render.laws import (HoldoutLocked, Ledger, RuleChanged, amend_rule, check_holdout, check_rule, claim_final,
                         complete_final, content_hash, experiment_rule, final_result, freeze_rule, option_prompts,
                         rule_in_force)
from render.laws.admission import (BudgetGuard, BudgetStop, Estimate, FIRST_LAUNCH_MARGIN, estimate_jobs,
                                outstanding_seconds, reservations, spent_gpu_seconds)
from tests.conftest import compose_cfg, run_render


def experiment(*overrides: str) -> object:
    return compose_cfg("experiment=tiny-demo", *overrides).experiment


# -- the ledger's copies ----------------------------------------------------------------------


def test_the_ledger_is_the_union_of_its_copies_and_sync_heals_them(tmp_path: Path) -> None:
    a, b = Ledger("tiny-demo", tmp_path / "a"), Ledger("tiny-demo", tmp_path / "b")
    a.sync()
    b.sync()  # both out_roots are now copies
    entry = a.append("holdout", option="holdout", content="c", sha=[])
    assert (tmp_path / "b" / "experiments" / "tiny-demo" / "ledger.jsonl").read_text().count(entry["id"]) == 1
    own = tmp_path / "a" / "experiments" / "tiny-demo" / "ledger.jsonl"
    own.unlink()  # this out_root's copy deleted: the user's still has it
    assert [e["id"] for e in a.entries("holdout")] == [entry["id"]]
    a.sync()
    assert entry["id"] in own.read_text()  # healed
    a.state_copy.unlink()  # the user's copy deleted (another machine, a wiped HOME): the out_roots still have it
    assert [e["id"] for e in a.entries("holdout")] == [entry["id"]]
    a.sync()
    assert entry["id"] in a.state_copy.read_text()


def test_older_registries_are_read_as_ledger_entries(tmp_path: Path) -> None:
    """An upgrade loses no reservation and no claim: FINAL.json and finals.jsonl of the previous contract."""
    folder = tmp_path / "experiments" / "tiny-demo"
    folder.mkdir(parents=True)
    (folder / "FINAL.json").write_text(json.dumps({"experiment": "tiny-demo", "claimed_at": "2026-11-30T09:44:29+00:00",
                                                   "token": "abc", "cells": []}))
    claim = Ledger("tiny-demo", tmp_path).first("claim")
    assert claim is not None and claim["token"] == "abc"


# -- the decision rule ------------------------------------------------------------------------


@pytest.mark.slow
def test_the_rule_is_frozen_and_a_change_is_refused_with_both_versions(tmp_path: Path) -> None:
    ledger = Ledger("tiny-demo", tmp_path)
    freeze_rule(ledger, experiment_rule(experiment()))
    check_rule(ledger, experiment_rule(experiment()))  # unchanged: fine
    for override, shown in [("experiment.quality.band=0.01", "quality.band: 0.002 -> 0.01"),
                            ("experiment.quality.alpha=0.1", "quality.alpha: 0.05 -> 0.1"),
                            ("experiment.rungs=[4,12]", "rungs"), ("experiment.eta=2", "eta: 3 -> 2"),
                            ("experiment.budget.gpu_hours=9", "budget.gpu_hours: 0.15 -> 9.0"),
                            ("experiment.seeds=[0,1]", "seeds"), ("experiment.quality.metric=lpips", "quality.metric"),
                            ("experiment.axes.steps=[2,4]", "axes.steps")]:
        with pytest.raises(RuleChanged) as error:
            check_rule(ledger, experiment_rule(experiment(override)))
        assert shown in str(error.value) and "in force:" in str(error.value) and "--amend" in str(error.value)


@pytest.mark.slow
def test_the_splits_enter_the_rule_by_content_not_by_option_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = Ledger("tiny-demo", tmp_path)
    freeze_rule(ledger, experiment_rule(experiment()))
    conf = tmp_path / "conf" / "prompts"
    conf.mkdir(parents=True)
    _, dev = option_prompts("dev")
    edited = tmp_path / "dev.jsonl"
    edited.write_text("".join(json.dumps({"id": p.id, "text": p.text if i else "a purple moon"}) + "\n"
                              for i, p in enumerate(dev)))
    (conf / "dev2.yaml").write_text(f"defaults: [/schema/prompts@_here_, _self_]\nname: dev2\nsplit: dev\nfile: {edited}\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RuleChanged, match="splits.dev"):
        check_rule(ledger, experiment_rule(experiment("experiment.dev=dev2")))


@pytest.mark.slow
def test_an_amendment_is_recorded_and_shown_and_refused_after_the_claim(tmp_path: Path) -> None:
    ledger = Ledger("tiny-demo", tmp_path)
    freeze_rule(ledger, experiment_rule(experiment()))
    wider = experiment_rule(experiment("experiment.quality.band=0.004"))
    with pytest.raises(RuleChanged, match="needs its reason"):
        amend_rule(ledger, wider, " ")
    entry = amend_rule(ledger, wider, "the anchor's own run-to-run spread is 0.003")
    assert entry is not None and entry["changes"] == ["quality.band: 0.002 -> 0.004"]
    check_rule(ledger, wider)  # in force now
    assert rule_in_force(ledger)[0] == wider
    claim_final(ledger, {"cells": [], "rule": wider})
    with pytest.raises(RuleChanged, match="final was claimed"):
        amend_rule(ledger, experiment_rule(experiment("experiment.quality.band=0.02")), "too late")


@pytest.mark.slow
def test_assess_refuses_a_changed_rule_and_amend_takes_it(tmp_path: Path) -> None:
    from assess.experiment import ExperimentError, load_experiment

    out_root = tmp_path / "outputs"
    freeze_rule(Ledger("tiny-demo", out_root), experiment_rule(experiment()))
    with pytest.raises(ExperimentError, match="quality.band: 0.002 -> 0.005"):
        load_experiment("tiny-demo", ["experiment.quality.band=0.005"], out_root)
    loose = load_experiment("tiny-demo", ["experiment.quality.band=0.005"], out_root, strict=False)
    assert loose.quality.band == 0.002 and "quality.band" in (loose.rule_problem or "")  # the rule in force, and why
    amended = load_experiment("tiny-demo", ["experiment.quality.band=0.005"], out_root, amend="wider band")
    assert amended.quality.band == 0.005 and amended.amendments[-1]["reason"] == "wider band"
    from assess.climb.printout import amendment_lines

    assert "quality.band: 0.002 -> 0.005" in amendment_lines(amended)[0]


@pytest.mark.slow
def test_a_render_with_a_changed_rule_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    ledger = Ledger("tiny-demo", (tmp_path / "outputs").resolve())
    freeze_rule(ledger, experiment_rule(experiment()))
    result = run_render("-m", "experiment=tiny-demo", "prompts=dev", "steps=2", "experiment.quality.band=0.5",
                        cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and "quality.band: 0.002 -> 0.5" in result.stderr
    assert not (tmp_path / "outputs" / "multirun").exists()


@pytest.mark.slow
def test_the_finals_verdict_is_the_one_under_the_rule_at_its_claim(tmp_path: Path) -> None:
    from assess.climb.run_final import claim_quality
    from assess.experiment import load_experiment

    out_root = tmp_path / "outputs"
    ledger = Ledger("tiny-demo", out_root)
    rule = experiment_rule(experiment())
    freeze_rule(ledger, rule)
    claim = claim_final(ledger, {"cells": [], "rule": rule})
    complete_final(ledger, claim, {"experiment": "tiny-demo", "parity": "parity", "band": 0.002})
    edited = load_experiment("tiny-demo", ["experiment.quality.band=0.0001"], out_root, strict=False)
    assert claim_quality(edited, claim) == (0.002, 0.05)
    assert final_result(ledger)["parity"] == "parity" and edited.rule_problem


# -- the final from anywhere ------------------------------------------------------------------


def test_a_claim_and_its_result_are_found_from_another_out_root_and_the_token_is_spent(tmp_path: Path) -> None:
    first = Ledger("tiny-demo", tmp_path / "one" / "outputs")
    _, holdout = option_prompts("holdout")
    claim = claim_final(first, {"cells": ["k"]}, content_hash(holdout))
    second = Ledger("tiny-demo", tmp_path / "two" / "outputs")  # another working folder, the same user state
    assert second.first("claim")["token"] == claim["token"]

    job = SimpleNamespace(out_root=second.out_root, prompts=holdout, render_anchor=False,
                          cell=SimpleNamespace(key="k", describe=lambda: "k"))
    exp = SimpleNamespace(name="tiny-demo", final=True, final_token=claim["token"], holdout="holdout")
    cfg = SimpleNamespace(get=lambda key: exp if key == "experiment" else None,
                          prompts=SimpleNamespace(name="holdout", file="holdout.jsonl"))
    check_holdout(job, cfg)  # the claimed final, with its token, for its cell: allowed
    complete_final(first, claim, {"parity": "parity"})
    assert final_result(second) == {"parity": "parity"}
    with pytest.raises(HoldoutLocked, match="token is spent"):
        check_holdout(job, cfg)


# -- the budget -------------------------------------------------------------------------------


def _spent_run(root: Path, name: str, seconds: float, experiment_name: str = "tiny-demo", text: str = "a red circle") -> None:
    path = root / name
    rundir.atomic_write_json(path / "run.json", {
        "schema": rundir.CONTRACT_VERSION, "cell_key": "k", "cell": {}, "anchor": {"cell_key": "a"}, "is_anchor": False,
        "prompts": {"name": "dev", "ids": ["dev-000"]}, "seeds": [0],
        "config": {"experiment": {"name": experiment_name}}})
    record = rundir.SampleRecord(cell_key="k", prompt_id="dev-000", seed=0, prompt=text, image="images/x.png",
                                 width=32, height=32, latency_s=seconds, warmup=False, steps=2, s_per_step=1.0,
                                 peak_mem_bytes=1, mem_kind="cpu-rss-hwm", load_s=0.0, reused_from=None,
                                 finished_at=rundir.now_iso())
    rundir.append_record(path / "samples.jsonl", record.as_dict())


def test_the_spend_is_the_experiments_across_every_out_root(tmp_path: Path) -> None:
    for name in ("a", "b"):
        Ledger("tiny-demo", tmp_path / name).sync()  # each launch records its out_root
    _spent_run(tmp_path / "a", "runs/x", 3.0)
    _spent_run(tmp_path / "b", "runs/y", 4.0, text="a blue square")
    _spent_run(tmp_path / "b", "runs/z", 4.0, text="a blue square")  # the same sample twice counts once
    assert spent_gpu_seconds(Ledger("tiny-demo", tmp_path / "a")) == 7.0
    assert spent_gpu_seconds(Ledger("tiny-demo", tmp_path / "b")) == 7.0


def test_a_detached_submission_keeps_its_reservation_until_its_jobs_end(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from render.laws import admission as budget

    ledger = Ledger("tiny-demo", tmp_path)
    gone = {"host": "nowhere", "pid": 999_999_999, "started_at": rundir.now_iso()}
    ledger.append("reservation", rid="r1", seconds=50.0, **{**gone, "host": __import__("socket").gethostname()})
    ledger.append("hold", rid="r1", slurm_jobs=["4242"])
    states = {"4242": "running"}
    monkeypatch.setattr(budget, "slurm_state", lambda job: (states[job], ""))
    assert outstanding_seconds(ledger) == 50.0  # its submitting process is gone, its job is not
    states["4242"] = "crashed"
    assert outstanding_seconds(ledger) == 0.0
    assert [r.rid for r in reservations(ledger)] == ["r1"]


def test_a_detached_ray_sweep_keeps_its_reservation_while_its_ray_job_runs(tmp_path: Path) -> None:
    """hydra/launcher=ray with wait=false: the reservation is held for the Ray job (asked of the cluster's job
    server, as the dashboard's REST API answers), and ends with it; a job server gone is a cluster gone."""
    import http.server
    import json
    import socket
    import threading

    states = {"raysubmit_1": "RUNNING"}

    class JobServer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            job = self.path.rsplit("/", 1)[-1]
            if self.path.startswith("/api/jobs/") and job in states:
                body = json.dumps({"submission_id": job, "status": states[job]}).encode()
                self.send_response(200)
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_error(404)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), JobServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    dashboard = f"http://127.0.0.1:{server.server_address[1]}"
    ledger = Ledger("tiny-demo", tmp_path)
    gone = {"host": socket.gethostname(), "pid": 999_999_999, "started_at": rundir.now_iso()}
    ledger.append("reservation", rid="r1", seconds=50.0, **gone)
    ledger.append("hold", rid="r1", ray_jobs=[{"id": "raysubmit_1", "dashboard": dashboard}])
    try:
        assert outstanding_seconds(ledger) == 50.0  # its submitting process is gone, its Ray job is not
        states["raysubmit_1"] = "SUCCEEDED"
        assert outstanding_seconds(ledger) == 0.0
        states["raysubmit_1"] = "PENDING"
        assert outstanding_seconds(ledger) == 50.0
    finally:
        server.shutdown()
        server.server_close()
    assert outstanding_seconds(ledger) == 0.0  # no job server: the cluster and its jobs are gone


def test_a_first_launch_is_estimated_with_its_model_load_and_a_margin() -> None:
    from render.laws.admission import History

    job = SimpleNamespace(cell=SimpleNamespace(key="k", model=SimpleNamespace(name="tiny"), height=32, width=32,
                                               device_kind="cpu", steps=4, describe=lambda: "k"), gpus=1,
                          calibration_renders=0)
    estimate = estimate_jobs([job], {"k": 3}, History([]), measure=lambda j: (1.0, 2.0))
    assert estimate == Estimate(3 * 1.0 * FIRST_LAUNCH_MARGIN + 2.0 * FIRST_LAUNCH_MARGIN, 1)


def test_the_guard_stops_a_sweep_at_the_navigable_ceiling(tmp_path: Path) -> None:
    from render.laws.admission import reserve

    ledger = Ledger("tiny-demo", tmp_path)
    ledger.sync()
    with ledger.lock():
        rid = reserve(ledger, 1.0)
    guard = BudgetGuard(ledger, rid, ceiling_s=10.0)
    guard.before(0.5)  # inside the reservation
    guard.spent(1.0)
    guard.before(0.5)  # past it: extended, the budget has room
    assert guard.reserved() > 1.0
    _spent_run(tmp_path, "runs/x", 9.8)  # what the experiment really spent, measured from its samples
    guard.spent(guard.reserved() - 1.0)  # this launch used its whole reservation
    with pytest.raises(BudgetStop, match="budget: experiment tiny-demo"):
        guard.before(0.5)


@pytest.mark.parametrize("sweeper", ["basic"])
def test_every_sweeper_path_goes_through_the_admission_or_is_refused(tmp_path: Path, sweeper: str) -> None:
    result = run_render("-m", "experiment=tiny-demo", f"hydra/sweeper={sweeper}", "prompts=dev", "steps=2,4",
                        cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and "admitted against the experiment's budget" in result.stderr
    assert not (tmp_path / "outputs" / "multirun").exists()


@pytest.mark.slow
def test_a_running_sweep_stops_before_the_reserve(tiny_cache: Path, tmp_path: Path) -> None:
    """The estimate is wrong (a history that says samples cost nothing): admission passes, and the running sweep
    is stopped by its measured spend before it reaches the final's reserve: recorded `cancelled`, `budget:`."""
    from render.cell import build_job
    from render.rundir import SampleRecord, append_record, atomic_write_json

    out_root = (tmp_path / "outputs").resolve()
    # the reference workload off: its device time is spent too (tests/laws/test_probe_admission.py), and with it this
    # budget of about a second is gone before the first sample; here the samples' own spend must stop the sweep
    args = ["experiment=tiny-demo", "prompts=dev", "prompts.limit=6", "steps=2", "render_anchor=false",
            "timing.reference=false", "experiment.budget.gpu_hours=0.0003", "experiment.budget.reserve_gpu_hours=0.0002"]
    job = build_job(compose_cfg("model=tiny", *args, out_root=out_root))
    history = out_root / "runs" / "history"
    atomic_write_json(history / "run.json", {"schema": rundir.CONTRACT_VERSION, "cell_key": job.cell.key,
                                             "cell": job.cell.canonical(), "anchor": {"cell_key": job.anchor.key},
                                             "is_anchor": False, "prompts": {"name": "dev", "ids": ["h"]}, "seeds": [99]})
    for n in range(3):
        append_record(history / "samples.jsonl", SampleRecord(
            cell_key=job.cell.key, prompt_id=f"h{n}", seed=99, prompt=f"history {n}", image="images/none.png", width=32,
            height=32, latency_s=1e-6, warmup=False, steps=2, s_per_step=1e-6, peak_mem_bytes=1, mem_kind="x",
            load_s=0.0, reused_from=None, finished_at=rundir.now_iso()).as_dict())
    result = run_render(*args, "model=tiny", f"out_root={out_root}", cwd=tmp_path, timeout=300)
    assert result.returncode == 1, result.stderr
    failed = next(out_root.glob("runs/*/*/FAILED.json"))
    record = json.loads(failed.read_text())
    assert record["category"] == "cancelled" and "budget:" in record["message"]
    done = (failed.parent / "samples.jsonl").read_text().splitlines()
    assert 1 <= len(done) < 6  # stopped, with the first samples kept


def test_the_finals_token_opens_its_holdout_samples_only(tmp_path: Path) -> None:
    """A dev sweep carrying the final's token would spend the reserve on navigation: refused."""
    ledger = Ledger("tiny-demo", tmp_path)
    _, holdout = option_prompts("holdout")
    _, dev = option_prompts("dev")
    claim = claim_final(ledger, {"cells": ["k"]}, content_hash(holdout))
    job = SimpleNamespace(out_root=tmp_path, prompts=dev[:2], render_anchor=False,
                          cell=SimpleNamespace(key="k", describe=lambda: "k"))
    exp = SimpleNamespace(name="tiny-demo", final=True, final_token=claim["token"], holdout="holdout")
    cfg = SimpleNamespace(get=lambda key: exp if key == "experiment" else None,
                          prompts=SimpleNamespace(name="dev", file="dev.jsonl"))
    with pytest.raises(HoldoutLocked, match="opens its holdout's samples only"):
        check_holdout(job, cfg)


@pytest.mark.slow
def test_the_per_category_rule_is_part_of_the_rule_when_it_decides(tmp_path: Path) -> None:
    """A rule frozen with the per-category keys at their defaults equals one frozen before they existed; turning
    per_category on (or changing its minimum) is a change of the rule."""
    ledger = Ledger("tiny-demo", tmp_path)
    rule = experiment_rule(experiment())
    assert "per_category" not in rule["quality"]
    freeze_rule(ledger, rule)
    check_rule(ledger, experiment_rule(experiment("experiment.quality.category_min_prompts=12")))  # no effect: off
    with pytest.raises(RuleChanged, match="quality.per_category"):
        check_rule(ledger, experiment_rule(experiment("experiment.quality.per_category=true")))
