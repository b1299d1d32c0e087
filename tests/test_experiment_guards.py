"""Render-side rules of an experiment: locked holdout, frozen anchor, budget and reserve, one final."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from render.laws import FinalAlreadyClaimed, Ledger, claim_final, final_record
from render.laws.gpu_budget import Budget
from render.laws.admission import Estimate, History, check_budget, seconds_per_sample
from tests.conftest import compose_cfg, run_render


def test_holdout_is_refused_outside_the_final(tmp_path: Path) -> None:
    result = run_render("experiment=tiny-demo", "prompts=holdout", cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and "locked holdout" in result.stderr and not (tmp_path / "outputs").exists()


def test_final_flag_without_a_claimed_final_is_refused(tmp_path: Path) -> None:
    result = run_render("experiment=tiny-demo", "prompts=holdout", "experiment.final=true", cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and "assess climb tiny-demo --final" in result.stderr


@pytest.mark.slow
def test_anchor_override_is_refused(tmp_path: Path) -> None:
    result = run_render("-m", "experiment=tiny-demo", "model.anchor.steps=4,8", cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and "the anchor is frozen" in result.stderr and not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_over_budget_sweep_is_refused_before_anything_is_written(tiny_cache: Path, tmp_path: Path) -> None:
    result = run_render("-m", "experiment=tiny-demo", "steps=2,4", "prompts=dev", "experiment.budget.gpu_hours=0.00001",
                        "experiment.budget.reserve_gpu_hours=0", cwd=tmp_path, timeout=120)
    assert result.returncode == 2
    assert "GPU-hours" in result.stderr and "left" in result.stderr and "spent" in result.stderr
    assert not (tmp_path / "outputs" / "multirun").exists()


def test_the_reserve_is_only_for_the_final() -> None:
    experiment = compose_cfg("experiment=tiny-demo", "experiment.budget.gpu_hours=1.0", "experiment.budget.reserve_gpu_hours=0.5").experiment
    needs_0_7_h = Estimate(seconds=0.7 * 3600, measured_cells=0)
    budget = Budget.of(experiment.budget)
    with pytest.raises(ValueError, match="reserve 0.5000 h kept for the final"):
        check_budget("tiny-demo", budget, False, spent_s=0.0, estimate=needs_0_7_h)
    check_budget("tiny-demo", budget, True, spent_s=0.0, estimate=needs_0_7_h)


def test_a_second_final_is_refused_with_the_date_of_the_first(tmp_path: Path) -> None:
    claim_final(Ledger("tiny-demo", tmp_path), {"cells": []})
    first = final_record(Ledger("tiny-demo", tmp_path))["at"]
    with pytest.raises(FinalAlreadyClaimed, match=re.escape(first)):
        claim_final(Ledger("tiny-demo", tmp_path / "elsewhere"), {"cells": []})  # another out_root, the same ledger


def write_run(root: Path, name: str, cell_key: str, steps: int, latencies: list[float]) -> None:
    run = root / name
    run.mkdir(parents=True)
    cell = {"model": {"name": "tiny"}, "height": 32, "width": 32, "device_kind": "cpu", "steps": steps}
    ids = [f"p{i}" for i in range(len(latencies))]
    (run / "run.json").write_text(json.dumps({"schema": 2, "cell_key": cell_key, "cell": cell, "anchor": {"cell_key": "a"},
                                              "is_anchor": False, "prompts": {"name": "dev", "ids": ids}, "seeds": [0],
                                              "config": {"experiment": {"name": "tiny-demo"}}}))
    lines = [{"prompt_id": i, "seed": 0, "image": f"images/{i}__s0.png", "steps": steps, "latency_s": t, "warmup": n == 0,
              "reused_from": None, "load_s": 0.0} for n, (i, t) in enumerate(zip(ids, latencies))]
    (run / "samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_cost_history_prefers_the_cell_then_fits_steps(tmp_path: Path) -> None:
    write_run(tmp_path, "a", "k4", 4, [9.0, 1.0, 1.0])  # first sample is a warm-up: ignored
    write_run(tmp_path, "b", "k8", 8, [9.0, 2.0, 2.0])
    history = History.scan(tmp_path)
    assert seconds_per_sample(history, "tiny", 32, 32, "cpu", 8, "k8") == 2.0
    assert seconds_per_sample(history, "tiny", 32, 32, "cpu", 16, "new") == pytest.approx(4.0)
    assert seconds_per_sample(history, "tiny", 64, 64, "cpu", 16, "new") is None
