"""An in-process sweep whose renders are its side-by-side timing (render.timing.interleave, issue 42): the cells the round
would time are opened first, then rendered in shuffled rounds with their anchor, and the latencies they record are
the session. Driven here in process on the tiny model, as the in-process launcher drives it (run_job with the
deferral, then drive). Slow: each test drives three real pipelines through six rounds (about 3 s)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from render.cell import build_job
from render.timing.interleave import Interleave
from render.run.loader import PIPELINES
from render.timing.sessions import MIN_ROUNDS
from render.rundir import SampleStore, read_samples
from render.rundir.session_log import read_sessions
from render.run.runner import CellResult, CellWriter, run_job
from tests.conftest import compose_cfg

pytestmark = pytest.mark.slow

BASE = ("model=tiny", "device=cpu", "prompts.limit=2", "render_anchor=true")
CELLS = ("steps=2", "steps=4")


def _open(out: Path, interleave: Interleave, cells: tuple[str, ...] = CELLS, *more: str) -> list[CellResult]:
    """Each cell run as the launcher runs it: run_job hands what it would render to the interleave."""
    results: list[CellResult] = []
    for override in cells:
        given = [*BASE, *more, override, f"out_root={out}"]
        job = build_job(compose_cfg(*given))
        results += run_job(job, out / "sweep" / override.replace("=", "-"), store=SampleStore(out),
                           pipelines=PIPELINES, overrides=given, defer=interleave)
    return results


def _anchor_dir(out: Path) -> Path:
    (anchor,) = {p.parent for p in (out / "anchors").rglob("run.json")}
    return anchor


def test_the_renders_are_the_session_each_sample_recorded_warm_and_every_cell_closed(tiny_cache: Path,
                                                                                     tmp_path: Path) -> None:
    out, interleave = tmp_path / "outputs", Interleave()
    results = _open(out, interleave)
    assert [r.status for r in results] == ["done"] * 3 and not any((r.run_dir / "DONE.json").exists() for r in results), \
        "the cells are opened (run.json) and left to the rounds"
    assert all((r.run_dir / "run.json").exists() for r in results)

    outcome = interleave.drive()
    assert outcome is not None and outcome.interleaved and outcome.timed_keys == {r.cell_key for r in results[1:]}, outcome
    assert [label.split()[-1] for label in outcome.timed] == list(CELLS), "named as the user wrote them"
    assert outcome.extra_rounds == MIN_ROUNDS - 2, "2 samples: the rounds go on over written samples to the minimum"
    for result in results:
        done = json.loads((result.run_dir / "DONE.json").read_text())
        assert (done["n_samples"], done["n_rendered"], result.n_rendered) == (2, 2, 2), done
    (session,), _ = read_sessions(_anchor_dir(out))
    assert session.complete and session.rounds == MIN_ROUNDS and len(session.contenders) == 3
    assert all(sorted(order) == [0, 1, 2] for order in session.orders), "every contender once in every round"
    for result in results:
        records, _ = read_samples(result.run_dir, result.cell_key)
        assert not any(r.warmup for r in records), "warmed up before the rounds: every recorded sample is warm"
        (timing,) = [c for c in session.contenders if c.cell_key == result.cell_key]
        assert list(timing.latencies[:2]) == [r.latency_s for r in records], \
            "a written round's latency is the one its sample recorded"
        assert (timing.matched, timing.differed) == (2, 0), "the extra rounds reproduce the written images"
    assert {r.cell_key for r in results} == {c.cell_key for c in session.contenders}
    (same,), _ = read_sessions(results[1].run_dir)
    assert same.session == session.session, "the session is in each contender's run directory"


def test_a_cell_that_fails_in_a_round_records_its_cause_and_the_others_go_on(tiny_cache: Path, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from render.run import runner

    real, calls = runner.render_samples, []

    def render_samples(loaded: Any, job: Any, texts: Any, seeds: Any, repeats: int) -> Any:
        if job.cell.steps == 4:
            calls.extend(texts)
            if len(calls) == 2:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real(loaded, job, texts, seeds, repeats)

    monkeypatch.setattr(runner, "render_samples", render_samples)
    out, interleave = tmp_path / "outputs", Interleave()
    results = _open(out, interleave)
    outcome = interleave.drive()
    assert outcome is not None
    failed = {r.describe.split()[-1]: r for r in results if r.status == "failed"}
    assert list(failed) == ["steps=4"], [(r.describe, r.status, r.message) for r in results]
    record = json.loads((failed["steps=4"].run_dir / "FAILED.json").read_text())
    assert "illegal memory access" in record["message"] and record["sample"]["prompt_id"] == "smoke-001", record
    assert len(read_samples(failed["steps=4"].run_dir, failed["steps=4"].cell_key)[0]) == 1, "its first sample kept"
    assert any("steps=4: failed during the rounds" in line for line in outcome.left_out), outcome.left_out
    assert [label.split()[-1] for label in outcome.timed] == ["steps=2"]
    (session,), _ = read_sessions(_anchor_dir(out))
    assert len(session.contenders) == 2 and session.complete, "the session goes on with the cells left"
    assert all(sorted(order) == [0, 1] for order in session.orders), "its orders renumbered to the cells kept"
    for result in results:
        if result.status == "done":
            assert json.loads((result.run_dir / "DONE.json").read_text())["n_rendered"] == 2


def test_a_cancellation_records_cancelled_in_every_open_cell_and_a_rerun_continues(
        tiny_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real, calls = CellWriter.produce, []

    def produce(self: CellWriter, *samples: tuple[str, str, int]) -> None:
        calls.extend(prompt_id for prompt_id, _, _ in samples)
        if len(calls) == 3 * 5 + 1:  # five whole rounds of three, then Ctrl-C
            raise KeyboardInterrupt
        real(self, *samples)

    monkeypatch.setattr(CellWriter, "produce", produce)
    out, interleave = tmp_path / "outputs", Interleave()
    results = _open(out, interleave, CELLS, "prompts.limit=6")
    with pytest.raises(KeyboardInterrupt):
        interleave.drive()
    for result in results:
        record = json.loads((result.run_dir / "FAILED.json").read_text())
        assert record["category"] == "cancelled", record
    (cut,), _ = read_sessions(results[-1].run_dir)
    assert not cut.complete and cut.rounds == 5, "the session keeps its rounds done, marked incomplete"

    monkeypatch.setattr(CellWriter, "produce", real)
    again = Interleave()
    reruns = _open(out, again, CELLS, "prompts.limit=6")
    outcome = again.drive()
    assert outcome is not None and [(r.describe.split()[-1], r.n_rendered) for r in reruns] == \
        [("anchor", 1), ("steps=2", 1), ("steps=4", 1)], "one sample left each, the anchor's in one folder"
    for result in reruns:
        done = json.loads((result.run_dir / "DONE.json").read_text())
        assert done["n_samples"] == 6 and not (result.run_dir / "FAILED.json").exists(), done
    _, session = read_sessions(results[-1].run_dir)[0]  # the cell's folder holds both (the anchor's is new)
    last_prompt = calls[-1]
    records, _ = read_samples(reruns[1].run_dir, reruns[1].cell_key)
    (missing,) = [r for r in records if r.prompt_id == last_prompt]
    assert session.complete and session.rounds == MIN_ROUNDS, "a resumed sweep times the minimum, not every sample"
    assert session.samples[0] not in cut.samples and len(set(cut.samples)) == 5, \
        "the sample left to render leads the rounds"
    assert outcome.extra_rounds == MIN_ROUNDS - 1


def test_an_anchor_rendered_before_is_timed_on_its_recorded_samples(tiny_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "outputs"
    first = Interleave()
    _open(out, first, ("steps=2",))
    first.drive()
    anchor = _anchor_dir(out)
    images = {p: p.read_bytes() for p in anchor.rglob("*.png")}

    later = Interleave()
    results = _open(out, later, ("steps=4",))
    assert len(results) == 1, "the anchor is not rendered again"
    outcome = later.drive()
    assert outcome is not None and outcome.timed_keys == {results[0].cell_key}, outcome
    sessions, _ = read_sessions(anchor)
    assert len(sessions) == 2 and len(sessions[1].contenders) == 2, "the new cell against its anchor, one session"
    (timing,) = [c for c in sessions[1].contenders if c.cell_key != results[0].cell_key]
    assert timing.run_dir == str(anchor) and (timing.matched, timing.differed) == (2, 0), \
        "the anchor's timed calls reproduce its recorded images"
    assert {p: p.read_bytes() for p in anchor.rglob("*.png")} == images, "and write nothing"


def test_cells_the_round_would_not_time_render_one_after_another(tiny_cache: Path, tmp_path: Path) -> None:
    out, interleave = tmp_path / "outputs", Interleave()
    given = [*BASE, "steps=2", "timing.side_by_side=false", f"out_root={out}"]
    job = build_job(compose_cfg(*given))
    (anchor, cell) = run_job(job, out / "sweep" / "steps-2", store=SampleStore(out), pipelines=PIPELINES,
                             overrides=given, defer=interleave)
    assert (cell.run_dir / "DONE.json").exists() and (anchor.run_dir / "DONE.json").exists()
    assert interleave.drive() is None, "nothing was left to the rounds"


def test_on_a_gpu_cells_are_interleaved_only_while_their_weights_fit_together(tiny_cache: Path, tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule docs/timing.md states, without a GPU: one copy of the weights on disk per open cell, plus the one
    asked about and the anchor's, within 80 % of the device's memory."""
    import dataclasses
    from types import SimpleNamespace

    import torch

    from render.timing import interleave as module

    job = dataclasses.replace(build_job(compose_cfg(*BASE, "steps=2", f"out_root={tmp_path}")), device="cuda:0")
    weights = module._weights_on_disk(module.model_source(job.cell.model))
    assert weights > 0, "the tiny model's weight files are counted"
    interleave = Interleave()
    memory = {"total": 0}
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(total_memory=memory["total"]))
    memory["total"] = int(2 * weights / module.FIT) + 1  # room for two copies: the cell and its anchor
    assert interleave._fits(job)
    interleave.runs.append(SimpleNamespace(job=SimpleNamespace(cell=SimpleNamespace(key="open-cell"))))  # type: ignore[arg-type]
    assert not interleave._fits(job), "a third copy does not fit"
    memory["total"] = int(3 * weights / module.FIT) + 1
    assert interleave._fits(job)
