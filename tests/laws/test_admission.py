"""Budget admission under other launches' live reservations (issue 31 item 6), and kin that a mutation of each
budget rule breaks: the mutations tried are listed in /work/notes/issue-28.md (each made one of these fail)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from render import rundir
from render.cell import anchor_job, build_job
from render.laws import Ledger
from render.laws.spend import Purpose, record_spend
from render.run.preflight import PreflightError, preflight_budget
from tests.conftest import compose_cfg

PER_SAMPLE_S = 10.0  # each of the cell and its anchor has one pending sample, estimated from history at 10 s


def _history(root: Path, cell_key: str, name: str) -> None:
    """A finished sample of `cell_key` (another text, another experiment): history for the estimate, no spend."""
    path = root / "history" / name
    rundir.atomic_write_json(path / "run.json", {
        "schema": rundir.CONTRACT_VERSION, "cell_key": cell_key, "cell": {}, "anchor": {"cell_key": "a"},
        "is_anchor": False, "prompts": {"name": "dev", "ids": ["h-000"]}, "seeds": [0],
        "config": {"experiment": {"name": "someone-else"}}})
    record = rundir.SampleRecord(cell_key=cell_key, prompt_id="h-000", seed=0, prompt="a history text",
                                 image="images/x.png", width=32, height=32, latency_s=PER_SAMPLE_S, warmup=False,
                                 steps=2, s_per_step=1.0, peak_mem_bytes=1, mem_kind="cpu-rss-hwm", load_s=0.0,
                                 reused_from=None, finished_at=rundir.now_iso())
    rundir.append_record(path / "samples.jsonl", record.as_dict())


def _job(out: Path, gpu_hours: float):
    cfg = compose_cfg("experiment=tiny-demo", "prompts.limit=1", "seed=0", "steps=2",
                      f"experiment.budget.gpu_hours={gpu_hours}", "experiment.budget.reserve_gpu_hours=0",
                      out_root=out)
    job = build_job(cfg)
    _history(out, job.cell.key, "cell")
    _history(out, anchor_job(job).cell.key, "anchor")
    return job


def _reservation(ledger: Ledger, rid: str, seconds: float, *, alive: bool = True) -> None:
    owner = {"host": socket.gethostname(), "pid": __import__("os").getpid() if alive else 999_999_999,
             "started_at": rundir.now_iso()}
    ledger.append("reservation", rid=rid, seconds=seconds, **owner)


def _admitted(job) -> bool:
    try:
        preflight_budget([job])
    except PreflightError as error:
        assert "GPU-hours" in str(error)
        return False
    return True


@pytest.mark.parametrize("case, admitted", [
    ("alone", True),                  # 20 s of 36: fits
    ("live reservation", False),      # another launch holds 20 s: 40 > 36
    ("dead reservation", True),       # its process is gone: nothing held
    ("released reservation", True),   # released: nothing held
])
def test_admission_counts_other_launches_live_reservations(tmp_path: Path, case: str, admitted: bool) -> None:
    out = tmp_path / "outputs"
    job = _job(out, gpu_hours=0.01)  # 36 s
    ledger = Ledger("tiny-demo", out)
    if case != "alone":
        _reservation(ledger, "other", 2 * PER_SAMPLE_S, alive=case != "dead reservation")
    if case == "released reservation":
        ledger.append("release", rid="other")
    assert _admitted(job) is admitted


def test_a_reservations_used_part_is_counted_once(tmp_path: Path) -> None:
    """A live reservation of 40 s that has spent 30: 30 spent + 10 still held + 20 estimated = 60 of 72 fits; counting
    the used part twice (as spend and as held) would refuse it."""
    out = tmp_path / "outputs"
    job = _job(out, gpu_hours=0.02)  # 72 s
    ledger = Ledger("tiny-demo", out)
    _reservation(ledger, "other", 40.0)
    record_spend(ledger, 30.0, Purpose.SAMPLE, rid="other")
    assert _admitted(job)


def test_an_admitted_launch_reserves_its_estimate_for_the_next(tmp_path: Path) -> None:
    """Two launches in a row: the first reserves its estimate (its process is alive), so the second is refused."""
    out = tmp_path / "outputs"
    job = _job(out, gpu_hours=0.01)
    assert _admitted(job)
    assert not _admitted(job)


@pytest.mark.parametrize("recorded, admitted", [
    (None, True),   # 20 s of 36, nothing kept (reserve 0): fits
    (10.0, True),   # the final's estimate 10 s x 1.25 kept: 20 + 12.5 <= 36
    (14.0, False),  # 14 s x 1.25 = 17.5 kept: 20 + 17.5 > 36, the final would be left short
])
def test_a_launch_keeps_the_finals_recorded_estimate_back_not_only_the_reserve(tmp_path: Path, recorded: float | None,
                                                                                 admitted: bool) -> None:
    """Issue 58: a reserve written before the machine's speed was known (0.03 GPU-h) left the demo's final 2 % short
    on a loaded machine. The climb records the final's current estimate in the ledger at every generation, and every
    launch's admission keeps it back, with its margin, when it is larger than the reserve."""
    from render.laws.admission import final_estimate, keep_for_final

    out = tmp_path / "outputs"
    job = _job(out, gpu_hours=0.01)  # 36 s
    ledger = Ledger("tiny-demo", out)
    ledger.sync()
    keep_for_final(ledger, recorded)
    assert final_estimate(ledger) == recorded
    assert _admitted(job) is admitted


def test_the_finals_estimate_is_recorded_when_it_moves_and_the_guard_keeps_it(tmp_path: Path) -> None:
    from render.laws.admission import BudgetGuard, BudgetStop, final_estimate, keep_for_final, reserve
    from render.laws.gpu_budget import FINAL_MARGIN, Budget

    ledger = Ledger("tiny-demo", tmp_path)
    ledger.sync()
    keep_for_final(ledger, 40.0)
    keep_for_final(ledger, 40.0)  # unchanged: not appended again
    keep_for_final(ledger, 60.0)
    assert [e["seconds"] for e in ledger.entries("keep")] == [40.0, 60.0] and final_estimate(ledger) == 60.0
    budget = Budget(gpu_hours=0.05, reserve_gpu_hours=0.01)  # 180 s, reserve 36 s
    assert budget.navigable_s(False, 60.0) == pytest.approx(180 - 60.0 * FINAL_MARGIN)
    assert budget.navigable_s(False, 10.0) == pytest.approx(180 - 36)  # the reserve when it is larger
    assert budget.navigable_s(True, 60.0) == pytest.approx(180)  # the final may spend it all
    with ledger.lock():
        rid = reserve(ledger, 100.0)
    guard = BudgetGuard(ledger, rid, budget.navigable_s(False, final_estimate(ledger)))
    guard.spent(100.0)
    with pytest.raises(BudgetStop):
        guard.before(10.0)  # 110 > 180 - 75: the final's share is not navigation's


def test_a_sweep_with_nothing_left_to_render_is_admitted_when_navigation_is_spent() -> None:
    """The README's demo after its dev sweep: a rung whose every sample that sweep had rendered was refused ("needs an
    estimated 0.0000 GPU-hours, but only 0.0000 are left") and the climb exited 1; rendering nothing spends nothing."""
    from render.laws.admission import BudgetExceeded, Estimate, check_budget
    from render.laws.gpu_budget import Budget

    budget = Budget(gpu_hours=0.01, reserve_gpu_hours=0.002)
    check_budget("demo", budget, False, spent_s=40.0, estimate=Estimate(0.0, 0))  # 40 s spent of 28.8 navigable
    with pytest.raises(BudgetExceeded, match="this sweep needs an estimated"):
        check_budget("demo", budget, False, spent_s=40.0, estimate=Estimate(0.5, 0))


def test_the_climb_tells_a_budget_refusal_from_any_other() -> None:
    """`assess climb --apply` decides again after a launch refused for budget (it stops on budget, keeping the final's
    share) and exits 1 on any other refusal."""
    from assess.climb.commands import RenderRefused
    from render.laws.admission import BUDGET_REFUSAL

    assert RenderRefused(f"the renderer refused `x` (exit 2): experiment demo: {BUDGET_REFUSAL} 0.01 GPU-hours").for_budget
    assert not RenderRefused("the renderer refused `x` (exit 2): cache=fbcahce: no such cache option").for_budget
