"""The climb's objective (issue 33 item 4): latency (the default) or GPU-seconds per image (latency x the cell's
width, throughput), frozen with the rule. A width-2 cell must be more than twice as fast per image to win on
GPU-seconds; every ranking of the climb and its speed interval read the objective's quantity."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from assess.cli import cli
from assess.climb.decide import decide
from assess.climb.speed_choice import compare
from assess.experiment import load_experiment
from assess.scoring.ingest import score
from render.laws.rule import Objective, freeze_rule
from tests.assess.climb_fixtures import DemoRuns, demo_cell, dev_ids, restore_hydra  # noqa: F401  (the fixture)
from tests.assess.conftest import shift
from tests.assess.test_climb_speed import IDS, PLAN, ROOMY, cell

pytestmark = pytest.mark.usefixtures("restore_hydra")

ULYSSES = {"name": "ulysses", "ulysses_degree": 2, "ring_degree": 1, "tp_degree": 1}
AXIS = "+experiment.axes.parallel=[none,ulysses]"
ONE, TWO = "parallel=none", "parallel=ulysses"


def climb(db: Path, *extra: str) -> str:
    result = CliRunner().invoke(cli, ["climb", "tiny-demo", "--db", str(db), "--set", AXIS, *extra])
    return result.output + (str(result.exception) if result.exception else "")


def incumbent_line(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("incumbent ("))


def one_and_two_gpus(tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch, wide_latency: float) -> None:
    """An indexed sweep of the tiny-demo climb: 8 steps on one GPU at 0.30 s/image and on two (Ulysses) at
    `wide_latency`, the same pixels, with the anchor; scored on ssim."""
    monkeypatch.chdir(tmp_path)
    runs = DemoRuns((tmp_path / "outputs").resolve())
    sweep, ids = runs.sweep(), dev_ids(4)
    runs.run(sweep, demo_cell(8), ids, perturb=shift(1), latency=0.30)
    runs.run(sweep, {**demo_cell(8), "parallel": ULYSSES}, ids, perturb=shift(1), latency=wide_latency)
    runs.anchor(ids)
    score([sweep], db, metrics=["ssim"])


@pytest.mark.slow
def test_a_width_2_cell_wins_on_latency_and_loses_on_gpu_seconds(tmp_path: Path, db: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """From run directories in the index: 8 steps on one GPU at 0.30 s/image, on two (Ulysses) at 0.20 s/image
    (0.40 GPU-s/image), the same pixels. Latency crowns the width-2 cell; the objective is frozen with the rule (a
    climb under another objective is refused); amended to gpu_seconds, the width-1 cell is crowned."""
    one_and_two_gpus(tmp_path, db, monkeypatch, 0.20)

    latency = climb(db)
    assert "objective latency (median warm s/image)" in latency
    # the twins' pixels are the same (parity), their work is not: the width-2 cell is ranked, not "same work"
    assert incumbent_line(latency).startswith(f"incumbent (parity at rung 4): steps=8 cache=none scheduler=default {TWO}, "
                                              "chosen on speed: faster beyond noise than")

    exp = load_experiment("tiny-demo", [AXIS])
    freeze_rule(exp.ledger, exp.rule)  # what the experiment's first launch does (render.laws.rule)
    refused = climb(db, "--set", "experiment.objective=gpu_seconds")
    assert 'objective: "latency" -> "gpu_seconds"' in refused and "--amend" in refused

    amended = climb(db, "--set", "experiment.objective=gpu_seconds", "--amend", "count GPU-seconds")
    assert 'rule amended: objective: "latency" -> "gpu_seconds"' in amended
    throughput = climb(db)  # the amendment holds without its --set
    assert "objective gpu_seconds (median warm latency x the cell's GPUs / its batch, GPU-s/image)" in throughput
    assert incumbent_line(throughput) == (  # 0.30 GPU-s/image against 0.40: the ratio is the objective's
        f"incumbent (parity at rung 4): steps=8 cache=none scheduler=default {ONE}, chosen on speed: faster beyond "
        f"noise than steps=8 cache=none scheduler=default {TWO} (speed ratio 0.75 [0.75, 0.75] over 3 shared prompt(s))")
    assert "GPU-s/image" in throughput.split("cells on dev")[1].splitlines()[1]  # the table's column: the objective's unit
    from assess.climb.archive import read_generations

    records = read_generations(exp.out_root, "tiny-demo")  # each record names its objective and its figure so
    assert [r["rule"]["objective"] for r in records][-1] == "gpu_seconds"
    assert records[-1]["incumbent"]["objective_value"] == pytest.approx(0.30) and "latency" not in records[-1]["incumbent"]
    wide = next(c for c in records[0]["cells"] if c["cell"].get("parallel") == "ulysses")
    assert records[0]["rule"]["objective"] == "latency" and wide["objective_value"] == pytest.approx(0.20)


FAST, SLOW = ("4", "none"), ("4", "fbcache")  # test_climb_speed's plan; the width is the cell's own


@pytest.mark.parametrize(("speedup", "winner"), [(1.6, FAST), (2.5, FAST)])
def test_on_latency_the_wider_cell_wins_whenever_faster(speedup: float, winner: tuple[str, ...]) -> None:
    one, two = np.full(len(IDS), 0.5), np.full(len(IDS), 0.5 / speedup)
    d = decide(PLAN, {SLOW: cell(SLOW, -0.01, one), FAST: cell(FAST, -0.01, two, width=2)}, [], ROOMY)
    assert d.incumbent == winner


@pytest.mark.parametrize(("speedup", "winner"), [(1.6, SLOW), (2.5, FAST)])
def test_on_gpu_seconds_the_wider_cell_must_be_more_than_twice_as_fast(speedup: float, winner: tuple[str, ...]) -> None:
    plan = dataclasses.replace(PLAN, objective=Objective.gpu_seconds)
    one, two = np.full(len(IDS), 0.5), np.full(len(IDS), 0.5 / speedup)
    cells = {SLOW: cell(SLOW, -0.01, one), FAST: cell(FAST, -0.01, two, width=2)}
    d = decide(plan, cells, [], ROOMY)
    assert d.incumbent == winner and d.speed_rule.startswith("on speed: faster beyond noise")
    assert d.current[FAST].latency == pytest.approx(2 * 0.5 / speedup)  # the objective's median, GPU-s/image


def test_the_speed_interval_scales_with_the_objective() -> None:
    """The paired interval of the render-time latencies and a side-by-side figure both turn into GPU-seconds."""
    rng = np.random.default_rng(1)
    one, two = 0.5 * np.exp(rng.normal(0, 0.1, len(IDS))), 0.3 * np.exp(rng.normal(0, 0.1, len(IDS)))
    a, b = cell(FAST, -0.01, two, width=2), cell(SLOW, -0.01, one)
    gpu = dataclasses.replace(PLAN, objective=Objective.gpu_seconds)
    ea, eb = (decide(PLAN, {FAST: a, SLOW: b}, [], ROOMY).current[c] for c in (FAST, SLOW))
    by_latency, by_gpu = compare(PLAN, a, ea, b, eb), compare(gpu, a, ea, b, eb)
    assert by_latency is not None and by_gpu is not None and by_latency.low is not None and by_gpu.low is not None
    assert (by_gpu.value, by_gpu.low, by_gpu.high) == pytest.approx(
        (2 * by_latency.value, 2 * by_latency.low, 2 * (by_latency.high or 0)))
    timed = dataclasses.replace(a, side_by_side={"key-4-fbcache": (0.6, 0.55, 0.65, 5)})
    together = compare(gpu, timed, ea, b, eb)
    assert together is not None and (together.value, together.low, together.high) == pytest.approx((1.2, 1.1, 1.3))
    assert together.b_faster  # twice the GPUs at 0.6 the latency: slower on GPU-seconds, beyond the interval


def test_a_side_by_side_sessions_cost_is_gpu_seconds_under_either_objective() -> None:
    """CLIMB_ROUNDS rounds and as much again for warm-ups and checks, each of the cell's calls holding its GPUs: a
    width-2 cell at 0.3 s/image costs 0.6 GPU-s a call, whether the objective's figure is its latency or GPU-s."""
    from assess.climb.generation import CLIMB_ROUNDS, side_by_side_cost

    wide = cell(FAST, -0.01, np.full(len(IDS), 0.3), width=2)
    gpu = dataclasses.replace(PLAN, objective=Objective.gpu_seconds)
    assert side_by_side_cost(PLAN, wide, 0.3) == pytest.approx(CLIMB_ROUNDS * 2 * 0.6)
    assert side_by_side_cost(gpu, wide, 0.6) == pytest.approx(CLIMB_ROUNDS * 2 * 0.6)
    assert side_by_side_cost(gpu, cell(SLOW, -0.01, np.full(len(IDS), 0.3)), 0.3) == pytest.approx(CLIMB_ROUNDS * 2 * 0.3)
    assert side_by_side_cost(PLAN, wide, None) == 0.0  # no latency yet: nothing to estimate from


def test_an_old_generation_records_latency_key_reads_as_its_objective_value() -> None:
    """Records written before the key was named kept the objective's figure (GPU-s under gpu_seconds) as `latency`."""
    from assess.climb.archive import objective_value
    from assess.export.selection import _generation_run

    old = {"generation": 1, "note": "", "record": "g0001.json", "rule": {"digest": "d"},
           "incumbent": {"status": "parity", "overrides": ["steps=8"], "latency": 0.4, "delta": 0.01}}
    new = {**old, "rule": {"objective": "gpu_seconds"}, "incumbent": {**old["incumbent"], "objective_value": 0.4}}
    del new["incumbent"]["latency"]
    assert objective_value(old["incumbent"]) == objective_value(new["incumbent"]) == 0.4
    assert objective_value({"delta": 0.01}) is None
    before, after = _generation_run(old, "tiny-demo", "p", 1), _generation_run(new, "tiny-demo", "p", 1)
    assert before.metrics["incumbent/objective_value"] == after.metrics["incumbent/objective_value"] == 0.4
    assert "incumbent/latency" not in after.metrics
    assert (before.params["objective"], after.params["objective"]) == ("", "gpu_seconds")


def test_a_parallel_cell_within_noise_is_timed_side_by_side_with_the_others(tmp_path: Path, db: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A session leads a parallel cell's ranks (render.timing.sessions), so the climb hands it over with its rivals. Before,
    the climb left it out and kept its render-time latency (timed apart)."""
    import assess.retime
    from assess.climb.generation import _observe, replay, time_rivals
    from assess.index.database import Index

    one_and_two_gpus(tmp_path, db, monkeypatch, 0.30)
    exp = load_experiment("tiny-demo", [AXIS])
    asked: list[frozenset[str]] = []
    monkeypatch.setattr(assess.retime, "retime_runs", lambda paths, db, options, log: asked.append(options.cells))
    with Index.open(db) as index:
        observed = _observe(index, exp, db, False, print)
        decision = replay(exp, observed).decision
        timed = [decision.incumbent, *decision.untimed]
        assert {" ".join(exp.cell_overrides(c)).split()[-1] for c in timed} == {ONE, TWO}  # within noise, untimed
        assert time_rivals(exp, index, db, observed, decision, print)
    assert asked == [frozenset(observed.keys[c] for c in timed)]


BATCH_AXIS = "+experiment.axes.batch=[1,4]"


@pytest.mark.slow
def test_the_climb_moves_along_batch_under_gpu_seconds_and_its_verdict_says_the_batch(
        tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 46: 8 steps one sample a call at 0.30 s/image, and a batch of 4 a call at 0.60 s a call (0.15 GPU-s an
    image), the same pixels. Latency crowns batch 1 (each image of a batch waits the whole call); amended to
    gpu_seconds, the climb moves to batch 4, and its incumbent line names the batch."""
    monkeypatch.chdir(tmp_path)
    runs = DemoRuns((tmp_path / "outputs").resolve())
    sweep, ids = runs.sweep(), dev_ids(4)
    runs.run(sweep, demo_cell(8), ids, perturb=shift(1), latency=0.30)
    runs.run(sweep, {**demo_cell(8), "batch": 4}, ids, perturb=shift(1), latency=0.60)
    runs.anchor(ids)
    score([sweep], db, metrics=["ssim"])

    def climb_batch(*extra: str) -> str:
        result = CliRunner().invoke(cli, ["climb", "tiny-demo", "--db", str(db), "--set", BATCH_AXIS, *extra])
        return result.output + (str(result.exception) if result.exception else "")

    latency = climb_batch()
    assert incumbent_line(latency).startswith("incumbent (parity at rung 4): steps=8 cache=none scheduler=default "
                                              "batch=1, chosen on speed"), latency
    exp = load_experiment("tiny-demo", [BATCH_AXIS])
    freeze_rule(exp.ledger, exp.rule)
    climb_batch("--set", "experiment.objective=gpu_seconds", "--amend", "count GPU-seconds per image")
    throughput = climb_batch()
    assert "objective gpu_seconds (median warm latency x the cell's GPUs / its batch, GPU-s/image)" in throughput
    assert incumbent_line(throughput).startswith("incumbent (parity at rung 4): steps=8 cache=none scheduler=default "
                                                 "batch=4, chosen on speed"), throughput


def test_a_batched_cells_gpu_seconds_divide_each_call_by_the_calls_own_size_not_the_configured_batch() -> None:
    """Issue 61: a batch-4 cell whose rung held 2 samples a call looked cheaper than it was: the objective divided a
    call's latency by 4 (0.0475 s/image against the records' 0.0825). Each latency is divided by the size of the call
    that rendered it, as its record holds it; a record without one falls back to the configured batch."""
    plan = dataclasses.replace(PLAN, objective=Objective.gpu_seconds)
    latencies = np.full(len(IDS), 0.165)
    halves = cell(("8", "none"), 0.0, latencies, batch=4, call_sizes={p: [2] for p in IDS})
    full = cell(("8", "none"), 0.0, latencies, batch=4, call_sizes={p: [4] for p in IDS})
    unknown = cell(("8", "none"), 0.0, latencies, batch=4)
    def values(c: object) -> list[float]:
        return [x for xs in plan.per_image(c).values() for x in xs]  # type: ignore[arg-type]

    assert values(halves) == pytest.approx([0.0825] * len(IDS))
    assert values(full) == pytest.approx([0.04125] * len(IDS))
    assert values(unknown) == pytest.approx([0.04125] * len(IDS))
    latency = dataclasses.replace(plan, objective=Objective.latency)
    assert latency.per_image(halves) == halves.latencies  # what an image waits is its call, whatever its size
