"""Speed-ups that replicate (docs/timing.md, issue 27): contenders timed side by side in one process on one device
(render.timing.sessions, `assess retime`), speed-ups from paired rounds (assess.statistics.side_by_side), every tool showing the paired
figure or saying "timed apart", the climb deciding on it, and byte-identical cells shown as one result.

The machine is made noisy on purpose where a figure is checked: a device whose speed changes from one round to
the next (the timed call's seconds scaled by a factor that moves over time), so that only a method that pairs the
contenders in time gets the true ratio back."""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from assess.cli import cli
from assess.index.database import Index
from assess.retime import Options, RetimeRefused, retime_runs
from assess.statistics.side_by_side import (SIDE_BY_SIDE, TIMED_APART, latency_ratios, median_interval_ranks, round_speedup,
                               side_by_side)
from render.timing import sessions as engine
from render.app import PIPELINES
from render.cell import build_job
from render.rundir import SampleStore, load_run, read_samples
from render.rundir.session_log import TIMINGS, read_sessions
from render.run.runner import run_job
from tests.conftest import compose_cfg

BASE = ("model=tiny", "device=cpu", "prompts.limit=2", "render_anchor=true")


def _render(out: Path, *overrides: str) -> Path:
    """One cell (and its anchor's missing samples) rendered in process, its overrides recorded as a sweep would."""
    given = [*BASE, *overrides, f"out_root={out}"]
    job = build_job(compose_cfg(*given))
    run_dir = out / "sweep" / "_".join(o.replace("=", "-") for o in overrides)
    results = run_job(job, run_dir, store=SampleStore(out), pipelines=PIPELINES, overrides=given)
    assert all(r.status == "done" for r in results), [r.message for r in results]
    return run_dir


@pytest.fixture
def sweep(tiny_cache: Path, tmp_path: Path) -> Path:
    out = tmp_path / "outputs"
    _render(out, "steps=2")
    _render(out, "steps=4")
    return out / "sweep"


class Drifting:
    """A device whose speed drifts: each timed call takes `work` (the cell's steps) x the device's slowness now,
    which moves by a random walk between rounds (every `per_round` calls: a shared machine whose load changes, a
    GPU clocking down), by up to 4x either way. The real pipeline still runs, so its output is what it is."""

    def __init__(self, real: Any, per_round: int = 3, seed: int = 0) -> None:
        self.real, self.per_round, self.rng, self.slowness, self.calls = real, per_round, random.Random(seed), 1.0, 0

    def __call__(self, loaded: Any, cell: Any, device: str, prompt: str, seed: int) -> tuple[Any, float]:
        pixels, _ = self.real(loaded, cell, device, prompt, seed)
        if self.calls % self.per_round == 0:
            self.slowness = min(4.0, max(0.25, self.slowness * self.rng.choice((0.5, 1.0, 2.0))))
        self.calls += 1
        return pixels, cell.steps * 0.01 * self.slowness


@pytest.mark.slow
def test_a_session_times_each_contender_once_per_round_in_one_process_and_writes_no_image(sweep: Path,
                                                                                          tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    before = {p: p.read_bytes() for p in sweep.parent.rglob("*") if p.is_file()}
    result = retime_runs([sweep], db, Options(rounds=6))
    (session,) = result.sessions
    assert session.rounds == 6 and session.complete and session.pid == os.getpid() and session.device == "cpu"
    assert len(session.contenders) == 3  # two cells and their anchor
    assert all(sorted(order) == [0, 1, 2] for order in session.orders)  # every contender once in every round
    assert all(len(c.latencies) == 6 and c.warmup_calls >= 1 for c in session.contenders)
    # what was timed is what was judged: every output checked against its recorded image, every one the same
    assert all(c.matched == 2 and c.differed == 0 for c in session.contenders)
    # no image written, no sample record touched: only each run directory's timings.jsonl is new
    after = {p: p.read_bytes() for p in sweep.parent.rglob("*") if p.is_file()}
    assert {p for p in after if p not in before} == {Path(c.run_dir) / TIMINGS for c in session.contenders}
    assert all(after[p] == data for p, data in before.items())
    for c in session.contenders:  # each copy describes the whole session
        (copy,), problems = read_sessions(Path(c.run_dir))
        assert copy == session and not problems
    with Index.open(db) as index:
        assert index.query("SELECT rounds, purpose FROM timing_sessions") == [{"rounds": 6, "purpose": "retime"}]
    assert {(p.cell, p.against) for p in result.pairs} == {
        (load_run(r).cell_key, load_run(r).anchor_cell_key) for r in sweep.iterdir()}


@pytest.mark.slow
def test_interleaved_rounds_recover_the_true_ratio_on_a_drifting_device(sweep: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    drifting = Drifting(engine.timed_call)
    monkeypatch.setattr(engine, "timed_call", drifting)
    result = retime_runs([sweep], tmp_path / "index.db", Options(rounds=12))
    for pair in result.pairs:  # the anchor renders 16 steps: exactly 16/steps slower in every round
        cell = load_run(next(r for r in sweep.iterdir() if load_run(r).cell_key == pair.cell)).cell
        assert pair.speedup.value == pytest.approx(16 / cell["steps"])
        assert pair.speedup.low == pytest.approx(16 / cell["steps"]) == pytest.approx(pair.speedup.high)


@pytest.mark.slow
def test_a_session_stopped_mid_way_keeps_its_rounds_marked_incomplete(sweep: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    real, calls = engine.timed_call, []

    def stopping(*args: Any) -> tuple[Any, float]:
        calls.append(1)
        if len(calls) == 3 + 3 * 4 + 2:  # warm-ups (one each), four whole rounds, then a stop mid-round
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(engine, "timed_call", stopping)
    with pytest.raises(KeyboardInterrupt):
        retime_runs([sweep], tmp_path / "index.db", Options(rounds=10))
    sessions = [s for r in sweep.iterdir() for s in read_sessions(r)[0]]
    assert sessions and all(not s.complete for s in sessions), sessions
    assert [s.rounds for s in sessions] == [4] * len(sessions), len(calls)
    assert all(len(c.latencies) == 4 for s in sessions for c in s.contenders)  # the cut round counts for nobody


@pytest.mark.slow
def test_an_output_that_differs_from_its_judged_image_is_reported(sweep: Path, tmp_path: Path) -> None:
    run_dir = next(sweep.iterdir())
    lines = (run_dir / "samples.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["sha256"] = "0" * 64  # the record says another image was judged
    (run_dir / "samples.jsonl").write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    result = retime_runs([sweep], tmp_path / "index.db", Options(rounds=6))
    timed = result.sessions[0].contender(load_run(run_dir).cell_key)
    assert timed is not None and timed.differed == 1
    pair = next(p for p in result.pairs if p.cell == load_run(run_dir).cell_key)
    assert pair.verified is False and "an output differs from the judged image" in pair.how
    assert any("an output differs from its judged image" in line for line in result.lines())


@pytest.mark.slow
def test_every_tool_shows_the_side_by_side_figure_once_timed_and_says_timed_apart_before(
        sweep: Path, tmp_path: Path) -> None:
    from assess.export.selection import cell_metrics
    from assess.report.write import sweep_cells, write_report
    from assess.scoring.ingest import score

    db = tmp_path / "index.db"
    score([sweep], db, metrics=["ssim"])
    runner = CliRunner()

    def status_speeds() -> list[dict[str, Any]]:
        out = runner.invoke(cli, ["status", str(sweep), "--json", "--db", str(db)], catch_exceptions=False)
        return [split for r in json.loads(out.stdout) if "speed" in r for split in r["speed"].values()]

    before = status_speeds()
    assert {s["timed"] for s in before} == {TIMED_APART} and all("not comparable beyond" in s["how"] for s in before)
    html = write_report([sweep], db, out=tmp_path / "before").read_text()
    assert f" · {TIMED_APART}</td>" in html  # the leaderboard (noisy or not)
    assert re.search(f'<td class="timed" title="[^"]*">{TIMED_APART}', html)  # the verdict table
    retime_runs([sweep], db, Options(rounds=6))
    speeds = status_speeds()
    assert {s["timed"] for s in speeds} == {SIDE_BY_SIDE} and all(s["render_time"] for s in speeds)
    assert all(s["how"].startswith("side by side: 6 interleaved rounds in one process on cpu") for s in speeds)
    html = write_report([sweep], db, out=tmp_path / "after").read_text()
    assert f" · {SIDE_BY_SIDE}</td>" in html and f" · {TIMED_APART}</td>" not in html
    assert re.search(f'<td class="timed" title="{SIDE_BY_SIDE}: 6 interleaved rounds[^"]*">{SIDE_BY_SIDE}<', html)
    with Index.open(db) as index:
        views, _ = sweep_cells(index, [sweep])
    metrics = [cell_metrics(v) for v in views if not v.is_anchor]
    assert metrics and all(m["speedup/side_by_side"] == 1.0 and "speedup/render_time" in m for m in metrics)


@pytest.mark.slow
def test_a_rebuilt_index_finds_the_sessions_in_the_run_directories(sweep: Path, tmp_path: Path) -> None:
    from assess.scoring.rebuild import rebuild_index

    db = tmp_path / "index.db"
    retime_runs([sweep], db, Options(rounds=6))
    db.unlink()
    rebuild_index([sweep.parent], db, metrics=["ssim"])
    with Index.open(db) as index:
        run = load_run(next(sweep.iterdir()))
        assert side_by_side(index, run.cell_key, run.anchor_cell_key) is not None


@pytest.mark.slow
def test_bad_input_is_refused_with_what_would_be_valid(sweep: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    db = str(tmp_path / "index.db")
    few = runner.invoke(cli, ["retime", str(sweep), "--rounds", "3", "--db", db])
    assert few.exit_code == 2 and "3 is not in the range x>=6" in few.output
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = runner.invoke(cli, ["retime", str(empty), "--db", db])
    assert nothing.exit_code == 1 and "Error:" in nothing.output and "empty" in nothing.output
    gpu = runner.invoke(cli, ["retime", str(sweep), "--device", "cuda", "--db", db])
    assert gpu.exit_code == 1 and "cuda" in gpu.output.lower()
    one = runner.invoke(cli, ["retime", str(next(sweep.iterdir())), "--db", db])  # a cell and its anchor: fine
    assert one.exit_code == 0, one.output
    assert "vs" in one.output and "rounds on cpu" in one.output


def test_a_cell_that_no_longer_composes_to_its_key_is_refused(sweep: Path, tmp_path: Path) -> None:
    run_dir = next(sweep.iterdir())
    run = json.loads((run_dir / "run.json").read_text())
    run["overrides"] = [o for o in run["overrides"] if not o.startswith("steps=")] + ["steps=3"]
    (run_dir / "run.json").write_text(json.dumps(run))
    with pytest.raises(RetimeRefused, match="not the recorded"):
        retime_runs([run_dir], tmp_path / "index.db", Options(rounds=6))
    assert not (run_dir / TIMINGS).exists()


@pytest.mark.slow
def test_a_parallel_cell_is_timed_side_by_side_with_its_ranks(sweep: Path, tmp_path: Path) -> None:
    """This process leads the cell's ranks for the session (render.run.ranks.team), as it rendered. Before, `assess
    retime` refused a parallel cell (exit 2); before that, its load raised diffusers' RuntimeError "torch.distributed
    must be available and initialized" after the other contenders had been loaded and warmed."""
    wide = _render(sweep.parent, "steps=4", "parallel=ulysses")
    key, twin = load_run(wide).cell_key, load_run(sweep / "steps-4").cell_key
    db = tmp_path / "index.db"
    result = CliRunner().invoke(cli, ["retime", str(sweep), "--db", str(db), "--rounds", "6", "--every-pair", "--json"])
    assert result.exit_code == 0, result.output
    pairs = {(p["cell"], p["against"]): p for p in json.loads(result.output[result.output.index("["):])}
    pair = pairs.get((key, twin)) or pairs[(twin, key)]
    assert pair["rounds"] == 6 and pair["verified"] is True  # each timed output is the image judged
    (session,), problems = read_sessions(wide)
    assert not problems
    timing = session.contender(key)
    assert timing is not None and len(timing.latencies) == 6 and timing.matched >= 1
    one = sum(c.load_s + sum(c.latencies) for c in session.contenders if c.cell_key != key)
    assert session.device_s > one + 2 * sum(timing.latencies)  # the wide cell's seconds count its two GPUs


def test_a_session_leads_one_parallel_cell() -> None:
    from types import SimpleNamespace

    from assess.retime import session_sets

    said: list[str] = []
    pairs = [("a", "n"), ("b", "n"), ("a", "b")]
    assert session_sets(pairs, {"a"}, False, said.append) == [["a", "b", "n"]]
    assert session_sets(pairs, {"a", "b"}, False, said.append) == [["a", "n"], ["b", "n"]]  # a, b: never together
    assert said and said[0].startswith("not timing a against b side by side: both are parallel cells")
    wide = [SimpleNamespace(job=SimpleNamespace(gpus=2, cell=SimpleNamespace(key=k))) for k in ("wide1", "wide2")]
    with pytest.raises(engine.RetimeError, match="2 parallel cells in one session .wide1, wide2.: a process leads one"):
        engine.check_widths(wide, "cpu")  # type: ignore[arg-type]


@pytest.mark.parametrize("n, ranks", [(5, None), (6, (1, 6)), (10, (2, 9)), (20, (6, 15)), (40, (14, 27))])
def test_the_median_interval_takes_the_binomial_order_statistics(n: int, ranks: tuple[int, int] | None) -> None:
    assert median_interval_ranks(n) == ranks


def test_the_round_interval_covers_the_true_ratio_at_its_stated_rate_even_with_bursts() -> None:
    """Simulated rounds (no clock): a true ratio of 3, log-normal noise per call, and a burst of load that hits one
    call of a round in 15 % of the rounds. The interval must cover 3 in at least 95 % of 2,000 sessions of 20 rounds
    (a t interval on the mean is pulled by the bursts; the order-statistic interval of the median is not)."""
    rng = random.Random(0)
    covered = 0
    for _ in range(2000):
        cell, anchor = [], []
        for _ in range(20):
            machine = rng.lognormvariate(0, 0.3)  # how busy the machine is this round: both calls see it
            c, a = machine * rng.lognormvariate(0, 0.05), 3 * machine * rng.lognormvariate(0, 0.05)
            if rng.random() < 0.15:  # a burst during one of the two calls only
                c, a = (c * 4, a) if rng.random() < 0.5 else (c, a * 4)
            cell.append(c)
            anchor.append(a)
        estimate = round_speedup(cell, anchor)
        assert estimate is not None and estimate.low is not None and estimate.high is not None
        covered += estimate.low <= 3 <= estimate.high
    assert covered / 2000 >= 0.95


@pytest.mark.slow
def test_the_climb_ranks_two_cells_on_their_side_by_side_rounds(sweep: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Two cells within noise on their render-time figures: once timed side by side, the rounds decide (the
    drifting device makes the render-time figures useless; the paired rounds are exact)."""
    from assess.climb.plan import CellData
    from assess.climb.speed_choice import compare, outpaces
    from tests.assess.test_climb_speed import PLAN  # the plan says how a latency ratio becomes the objective's

    monkeypatch.setattr(engine, "timed_call", Drifting(engine.timed_call))
    db = tmp_path / "index.db"
    runs = {load_run(r).cell["steps"]: load_run(r) for r in sweep.iterdir()}
    retime_runs([sweep], db, Options(rounds=6, every_pair=True))
    with Index.open(db) as index:
        ratios = latency_ratios(index, [runs[2].cell_key, runs[4].cell_key])
    fast = CellData(("2",), runs[2].cell_key, side_by_side={b: f for (a, b), f in ratios.items() if a == runs[2].cell_key},
                    noisy="flagged noisy by its render")
    slow = CellData(("4",), runs[4].cell_key, side_by_side={b: f for (a, b), f in ratios.items() if a == runs[4].cell_key})
    ratio = compare(PLAN, fast, None, slow, None)  # type: ignore[arg-type]  # side by side: no evaluation read
    assert ratio is not None and ratio.value == pytest.approx(0.5) and ratio.a_faster and "side-by-side" in ratio.text()
    assert outpaces(PLAN, fast, None, slow, None)  # type: ignore[arg-type]  # noisy render, exact rounds


@pytest.mark.slow
def test_a_cell_that_reproduces_another_byte_for_byte_is_one_result(tiny_cache: Path, tmp_path: Path) -> None:
    from assess.report.write import sweep_cells, write_report
    from assess.scoring.ingest import score

    out = tmp_path / "outputs"
    plain = _render(out, "steps=2")
    idle = _render(out, "steps=2", "cache=fbcache", "cache.threshold=0")  # a cache that can never reuse a step
    shas = [sorted(r.sha256 or "" for r in read_samples(d, load_run(d).cell_key)[0]) for d in (plain, idle)]
    assert shas[0] == shas[1]  # the same work
    db = tmp_path / "index.db"
    score([out / "sweep"], db, metrics=["ssim"])
    with Index.open(db) as index:
        views, _ = sweep_cells(index, [out / "sweep"])
    cells = [v for v in views if not v.is_anchor]
    assert len(cells) == 2 and [v.same_work_as for v in cells] == [None, cells[0].cell_key], \
        "both listed, the later naming the first and following it"
    html = write_report([out / "sweep"], db, out=tmp_path / "report").read_text()
    assert "byte-identical images, one result" in html
