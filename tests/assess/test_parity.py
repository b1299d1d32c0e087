"""Parity against one GPU (assess.statistics.parity): a parallel cell's samples against its width-1 twin's, in the index,
and the `parallel-drift` flag that keeps the climb from crowning it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from assess.index.database import Index
from assess.statistics.parity import MAX_LEVELS, drift, drifting, outside_band, twin_key
from assess.scoring.ingest import score
from tests.assess.conftest import RunFactory, anchor_image, cell_key_of, make_cell, shift

ULYSSES = {"name": "ulysses", "ulysses_degree": 2, "ring_degree": 1, "tp_degree": 1}
RING = {"name": "ring", "ulysses_degree": 1, "ring_degree": 2, "tp_degree": 1}


def _parallel(value: dict[str, Any]) -> dict[str, Any]:
    return {**make_cell(attention="sdpa"), "parallel": value}


def test_the_twin_is_the_cell_without_parallel() -> None:
    assert twin_key(make_cell()) is None
    assert twin_key(_parallel(ULYSSES)) == cell_key_of(make_cell(attention="sdpa"))


def test_drift_counts_levels_and_ssim() -> None:
    image = anchor_image("p1", 0)
    assert drift(image, image) == (0, pytest.approx(1.0), None)
    levels, ssim, _ = drift(shift(10)(image, "p1", 0), image)
    assert levels == 10 and ssim is not None and ssim < 1.0
    one_level = image.copy()
    one_level[0, 0, 0] += 1  # rounding: inside the band
    assert outside_band(*drift(one_level, image)[:2]) is None
    assert outside_band(MAX_LEVELS + 1, 1.0) == f"{MAX_LEVELS + 1} levels apart (band: {MAX_LEVELS})"
    assert outside_band(0, 0.894) == "SSIM 0.8940 (band: 0.999)"
    with pytest.raises(ValueError, match="image is 16x16, its twin's 32x32"):
        drift(image[:16, :16], image)


def test_a_clip_is_compared_frame_by_frame_and_its_worst_frame_counts(tmp_path: Path) -> None:
    """Before, a parallel clip's parity row said "clips are not compared with their twin yet"."""
    from types import SimpleNamespace

    import numpy as np

    from assess.statistics.parity import clip_drift
    from render.run.apng import CHUNK, clip_bytes

    frames = np.stack([anchor_image("p1", i) for i in range(CHUNK + 2)])  # two chunks
    bad = frames.copy()
    bad[CHUNK + 1] = shift(10)(bad[CHUNK + 1], "p1", 0)  # one frame of the second chunk drifts
    for name, clip in (("twin", frames), ("same", frames), ("bad", bad)):
        (tmp_path / f"{name}.png").write_bytes(clip_bytes(clip, 16))
    sample, twin = SimpleNamespace(frames=len(frames), fps=16), {"frames": len(frames), "fps": 16}
    assert clip_drift(tmp_path / "same.png", sample, tmp_path / "twin.png", twin) == (0, pytest.approx(1.0), None)
    levels, ssim, _ = clip_drift(tmp_path / "bad.png", sample, tmp_path / "twin.png", twin)
    assert levels == 10 and ssim is not None and outside_band(levels, ssim) is not None
    with pytest.raises(ValueError, match="the twin's clip has 9 frames, this sample 10"):
        clip_drift(tmp_path / "same.png", sample, tmp_path / "twin.png", {"frames": 9, "fps": 16})


def test_score_records_each_parallel_sample_against_its_twin(outputs: RunFactory, db: Path, tmp_path: Path) -> None:
    from assess.report.write import write_report

    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor")
    outputs.run(outputs.root / "twins" / "tiny" / "k", "stamp", make_cell(attention="sdpa"))  # the width-1 twin
    outputs.run(sweep, "1_ulysses", _parallel(ULYSSES), overrides=["parallel=ulysses"])  # the same pixels
    outputs.run(sweep, "2_ring", _parallel(RING), overrides=["parallel=ring"], perturb=shift(10))  # a broken kernel
    score([outputs.root], db, metrics=["ssim"])  # the twin (attention=sdpa) is a lossless sibling of the anchor: a floor
    with Index.open(db) as index:
        ulysses, ring = index.parity(cell_key_of(_parallel(ULYSSES))), index.parity(cell_key_of(_parallel(RING)))
        assert len(ulysses) == len(ring) == 8
        assert [(r["max_levels"], r["ssim"]) for r in ulysses] == [(0, pytest.approx(1.0))] * 8
        assert {r["max_levels"] for r in ring} == {10}
        assert drifting(ulysses) is None
        flag = drifting(ring)
        assert flag is not None and flag.startswith(
            f"parallel-drift: 8 of 8 sample(s) outside the band against the single-call twin (width 1, batch 1) "
            f"{cell_key_of(make_cell(attention='sdpa'))}; the worst is 10 levels apart")
        assert index.parity(cell_key_of(make_cell(attention="sdpa"))) == []  # width 1: nothing to compare
    from assess.status import status, with_drift

    details = {r.name: r.detail for r in with_drift(status(sweep), db)}  # `assess status` with the index beside it
    assert details["parallel=ring"].startswith("PARALLEL-DRIFT: 8 of 8 sample(s) outside the band")
    floor = "lossless floor: 1 - SSIM 0 (95 % up to 0) on attention=sdpa against the anchor, 4 prompt(s)"
    assert details["parallel=ring"].endswith(floor)  # the floor beside the drift
    assert not details["parallel=ulysses"].startswith("PARALLEL-DRIFT")  # status names cells by their overrides
    assert with_drift(status(sweep), db.with_name("none.db")) == status(sweep)  # no index: the folders alone
    notes: list[str] = []
    write_report([sweep], db, tmp_path / "report", notes=notes)  # the report says both, the drift as a warning
    assert any(" parallel=ring: parallel-drift: 8 of 8 sample(s)" in n for n in notes), notes
    assert any("parity with its single-call twin" in n and "at most 0 level(s) apart, SSIM at least 1.0000 (1 - SSIM 0)" in n
               and n.endswith(floor) for n in notes), notes
    assert any(" parallel=ring: parallel-drift: " in n and n.endswith(floor) for n in notes), notes


def test_a_missing_twin_is_said_and_flags_nothing(outputs: RunFactory, db: Path) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor")
    outputs.run(sweep, "1_ulysses", _parallel(ULYSSES), overrides=["parallel=ulysses"])
    summary = score([sweep], db, metrics=["psnr"])
    assert any("parallel_drift unavailable for 8 sample(s): twin sample missing" in line for line in summary.lines())
    with Index.open(db) as index:
        assert drifting(index.parity(cell_key_of(_parallel(ULYSSES)))) is None


def test_scoring_twice_keeps_one_row_per_sample(outputs: RunFactory, db: Path) -> None:
    sweep = outputs.sweep()
    outputs.run(outputs.root / "twins" / "tiny" / "k", "stamp", make_cell(attention="sdpa"))
    outputs.run(sweep, "1_ulysses", _parallel(ULYSSES), overrides=["parallel=ulysses"])
    for _ in range(2):
        score([outputs.root], db, metrics=["psnr"])
    with Index.open(db) as index:
        assert len(index.parity(cell_key_of(_parallel(ULYSSES)))) == 8


def test_a_drift_already_indexed_is_not_computed_again_unless_forced(outputs: RunFactory, db: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, every `assess score` of a parallel cell read each sample and its twin's again."""
    import assess.statistics.parity

    sweep = outputs.sweep()
    outputs.run(outputs.root / "twins" / "tiny" / "k", "stamp", make_cell(attention="sdpa"))
    outputs.run(sweep, "1_ulysses", _parallel(ULYSSES), overrides=["parallel=ulysses"])
    calls: list[int] = []
    real = assess.statistics.parity.drift
    monkeypatch.setattr(assess.statistics.parity, "drift", lambda *a: calls.append(1) or real(*a))
    for force, computed in ((False, 8), (False, 0), (True, 8)):
        calls.clear()
        score([outputs.root], db, metrics=["psnr"], force=force)
        assert len(calls) == computed, (force, len(calls))
    with Index.open(db) as index:
        assert len(index.parity(cell_key_of(_parallel(ULYSSES)))) == 8


def test_a_parallel_cell_is_never_merged_with_its_twin_as_the_same_work(outputs: RunFactory, db: Path,
                                                                         tmp_path: Path) -> None:
    """Its images are its twin's, byte for byte, by design; its work is not (other GPUs, another latency). Before,
    the report merged it into its twin's row ("same images as ..."), so its verdict, speed-up and per-GPU figures
    never showed; only the climb had been taught otherwise."""
    from assess.report.write import write_report
    from assess.statistics.side_by_side import same_work

    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor")
    outputs.run(sweep, "1_none", make_cell(attention="sdpa"), overrides=["parallel=none"], latency=0.2)
    outputs.run(sweep, "2_ulysses", _parallel(ULYSSES), overrides=["parallel=ulysses"], latency=0.15)
    outputs.run(sweep, "3_same", make_cell(attention="flash"), overrides=["attention=flash"], latency=0.2)
    score([outputs.root], db, metrics=["ssim"])
    none, wide, same = cell_key_of(make_cell(attention="sdpa")), cell_key_of(_parallel(ULYSSES)), \
        cell_key_of(make_cell(attention="flash"))
    with Index.open(db) as index:
        assert same_work(index, [none, wide, same], "smoke") == {same: none}  # width 1 still merges
    html = write_report([sweep], db, tmp_path / "report").read_text()
    table = html[:html.index("</table>")]
    assert "parallel=ulysses" in table and "2 GPUs: " in table and "over its width-1 twin" in table


def test_the_climb_never_crowns_a_drifting_cell() -> None:
    from tests.assess.test_climb_decide import PLAN, ROOMY, generation_one

    from assess.climb.decide import decide

    data = generation_one()
    assert decide(PLAN, data, [], ROOMY).incumbent == ("4", "none")  # the fastest at parity ...
    flag = "parallel-drift: 4 of 4 sample(s) outside the band against the single-call twin (width 1, batch 1) k; the worst is SSIM 0.8940"
    data[("4", "none")] = dataclasses.replace(data[("4", "none")], drift=flag)
    d = decide(PLAN, data, [], ROOMY)
    assert d.incumbent == ("8", "taylorseer")  # ... drifts from one GPU: the next fastest at parity is crowned
    assert ("4", "none") not in [p.coords for p in d.proposals]  # and it is never promoted


def test_scoring_a_sweep_finds_the_twin_wherever_it_was_rendered(outputs: RunFactory, db: Path,
                                                                   tmp_path: Path) -> None:
    """A final scores its sweeps only (assess.climb.commands.run_and_score), never `twins/`: the scorer finds a
    parallel cell's twin where the output root's registry says it was rendered, as it finds the anchor."""
    from render import rundir

    sweep = outputs.sweep()
    outputs.stored_anchor(seeds=(0, 1, 2))
    twin_cell = make_cell(attention="sdpa")
    kept = outputs.run(outputs.root / "twins" / "tiny" / cell_key_of(twin_cell), "stamp", twin_cell)
    elsewhere = outputs.run(tmp_path / "scratch", "twin", twin_cell, seeds=(2,))  # hydra.run.dir outside out_root
    for folder in (kept, elsewhere):
        rundir.register(outputs.root, folder, cell_key_of(twin_cell))  # as the runner does before a first sample
    outputs.run(sweep, "1_ulysses", _parallel(ULYSSES), overrides=["parallel=ulysses"], seeds=(0, 1, 2))
    summary = score([sweep], db, metrics=["psnr"])
    assert not any("unavailable" in line for line in summary.lines()), summary.lines()
    with Index.open(db) as index:
        rows = index.parity(cell_key_of(_parallel(ULYSSES)))
        assert [(r["max_levels"], r["unavailable_reason"]) for r in rows] == [(0, None)] * 12


# The functions of assess.statistics.parity called directly (mutation testing, docs/testing.md): each promise below
# was left unguarded by the tests above, which reach them through `assess score` and the report.

_ROW_KEYS = {"cell_key", "prompt_sha", "seed", "twin_cell_key", "max_levels", "ssim", "unavailable_reason"}


class _ParallelRun:
    """What parity_rows reads of a parallel cell's RunDir: its keys, its samples and where each image lies."""

    def __init__(self, path: Path, samples: list[Any]) -> None:
        self.path, self.samples, self.cell_key, self.twin_key = path, samples, "wide", "narrow"

    def image_path(self, sample: Any) -> Path:
        return self.path / sample.image


def _sample(text: str, image: str, frames: int | None = None) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(text_id=text, seed=0, prompt_id=f"p-{text}", image=image, frames=frames,
                           fps=16 if frames else None)


def _png(path: Path, image: Any) -> str:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image).save(path)
    return path.name


def _row(text: str, levels: int | None, ssim: Any, why: str | None) -> dict[str, Any]:
    return {"cell_key": "wide", "prompt_sha": text, "seed": 0, "twin_cell_key": "narrow", "max_levels": levels,
            "ssim": ssim, "unavailable_reason": why}


def test_each_parallel_sample_is_compared_with_its_twins_of_the_same_text_and_seed_and_one_not_compared_says_why(
        tmp_path: Path) -> None:
    from assess.scoring.ingest import read_image
    from assess.statistics.parity import parity_rows

    wide, narrow = tmp_path / "wide", tmp_path / "narrow"
    image = anchor_image("p1", 0)
    samples = [_sample(t, _png(wide / f"{t}.png", image)) for t in ("same", "gone", "escapes", "no-twin")]
    _png(narrow / "same.png", shift(1)(image, "p1", 0))
    twins = {("same", 0): {"run_path": str(narrow), "image": "same.png"},
             ("gone", 0): {"run_path": str(narrow), "image": "gone.png"},  # its file deleted: an OSError
             ("escapes", 0): {"run_path": str(narrow), "image": "../wide/escapes.png"}}  # outside the twin's folder
    rows = parity_rows(_ParallelRun(wide, samples), twins, read_image)  # type: ignore[arg-type]
    assert all(set(r) == _ROW_KEYS for r in rows)
    assert [r["prompt_sha"] for r in rows] == ["same", "gone", "escapes", "no-twin"]
    assert rows[0] == _row("same", 1, pytest.approx(1.0, abs=0.01), None)
    assert rows[1] == _row("gone", None, None, rows[1]["unavailable_reason"])
    assert "gone.png" in rows[1]["unavailable_reason"]
    assert rows[2] == _row("escapes", None, None, rows[2]["unavailable_reason"])
    assert rows[2]["unavailable_reason"].startswith("twin image ../wide/escapes.png of ")
    assert rows[3] == _row("no-twin", None, None, "twin sample missing (cell narrow, prompt p-no-twin, seed 0): "
                                                  "re-run the parallel cell, which renders it")


def test_a_sample_whose_drift_is_indexed_is_not_compared_again_and_the_samples_after_it_are(tmp_path: Path) -> None:
    from assess.scoring.ingest import read_image
    from assess.statistics.parity import parity_rows

    image = anchor_image("p1", 0)
    samples = [_sample(t, _png(tmp_path / f"{t}.png", image)) for t in ("a", "b", "c")]
    twins = {(t, 0): {"run_path": str(tmp_path), "image": f"{t}.png"} for t in ("a", "b", "c")}
    rows = parity_rows(_ParallelRun(tmp_path, samples), twins, read_image, done={("a", 0)})  # type: ignore[arg-type]
    assert [(r["prompt_sha"], r["max_levels"]) for r in rows] == [("b", 0), ("c", 0)]


def test_a_parallel_clip_is_compared_with_its_twins_clip_and_one_too_small_for_ssim_says_so(tmp_path: Path) -> None:
    import numpy as np

    from assess.scoring.ingest import read_image
    from assess.statistics.parity import parity_rows
    from render.run.apng import clip_bytes

    frames = np.stack([anchor_image("p1", i) for i in range(3)])
    small = frames[:, :8, :8]  # smaller than SSIM's window
    for name, clip in (("clip", frames), ("twin", shift(3)(frames, "p1", 0)), ("small", small), ("small-twin", small)):
        (tmp_path / f"{name}.png").write_bytes(clip_bytes(clip, 16))
    samples = [_sample("clip", "clip.png", frames=3), _sample("small", "small.png", frames=3)]
    twins = {(t, 0): {"run_path": str(tmp_path), "image": f"{i}.png", "frames": 3, "fps": 16}
             for t, i in (("clip", "twin"), ("small", "small-twin"))}
    rows = parity_rows(_ParallelRun(tmp_path, samples), twins, read_image)  # type: ignore[arg-type]
    assert rows[0] == _row("clip", 3, rows[0]["ssim"], None) and rows[0]["ssim"] < 1.0
    assert rows[1] == _row("small", 0, None, "image is 8x8, smaller than SSIM's 11x11 window")


def test_a_drift_is_reused_only_against_the_same_twin_with_both_figures_and_no_reason() -> None:
    from assess.statistics.parity import stored_parity

    def row(text: str, twin: str = "narrow", levels: int | None = 0, ssim: float | None = 1.0,
            why: str | None = None) -> dict[str, Any]:
        return {"prompt_sha": text, "seed": 7, "twin_cell_key": twin, "max_levels": levels, "ssim": ssim,
                "unavailable_reason": why}

    rows = [row("kept"), row("other-twin", twin="old"), row("no-levels", levels=None), row("no-ssim", ssim=None),
            row("why", why="twin sample missing"), row("no-levels-no-ssim", levels=None, ssim=None)]
    assert stored_parity(rows, "narrow") == {("kept", 7)}
    assert stored_parity(rows, "old") == {("other-twin", 7)}


def test_drift_at_the_bands_edge_is_inside_it() -> None:
    from assess.statistics.parity import MIN_SSIM

    assert outside_band(MAX_LEVELS, MIN_SSIM) is None
    assert outside_band(MAX_LEVELS + 1, MIN_SSIM) is not None and outside_band(MAX_LEVELS, MIN_SSIM - 1e-6) is not None


def test_a_size_mismatch_names_the_width_and_height_of_each_image() -> None:
    image = anchor_image("p1", 0)
    with pytest.raises(ValueError, match="image is 24x16, its twin's 16x24"):
        drift(image[:16, :24], image[:24, :16])


def _drift_row(levels: int | None, ssim: float | None) -> dict[str, Any]:
    return {"max_levels": levels, "ssim": ssim, "twin_cell_key": "k", "unavailable_reason": None}


def test_the_worst_drifting_sample_is_the_most_levels_apart_then_the_lowest_ssim() -> None:
    flag = "parallel-drift: {} of {} sample(s) outside the band against the single-call twin (width 1, batch 1) k; "
    assert drifting([_drift_row(10, 0.99), _drift_row(3, 0.95)]) == flag.format(2, 2) + "the worst is 10 levels apart (band: 2)"
    assert drifting([_drift_row(0, 0.95), _drift_row(0, 0.90), _drift_row(0, 1.0)]) == \
        flag.format(2, 3) + "the worst is SSIM 0.9000 (band: 0.999)"
    assert drifting([_drift_row(5, None)]) == flag.format(1, 1) + "the worst is 5 levels apart (band: 2)"
    assert drifting([_drift_row(0, 1.0)]) is None


def test_the_parity_note_names_the_twin_the_worst_figures_and_the_floor_or_why_it_was_not_compared() -> None:
    from assess.statistics.parity import parity_note

    assert parity_note([]) is None
    missing = {**_drift_row(None, None), "unavailable_reason": "twin sample missing"}
    assert parity_note([missing]) == "parity with its single-call twin: not compared (twin sample missing)"
    assert parity_note([missing], "lossless floor: x") == \
        "parity with its single-call twin: not compared (twin sample missing); lossless floor: x"
    assert parity_note([_drift_row(1, None), missing]) == \
        "parity with its single-call twin k: 1 sample(s), at most 1 level(s) apart (band: 2 levels, SSIM 0.999)"
    assert parity_note([_drift_row(1, 0.9995), _drift_row(0, 1.0)]) == (
        "parity with its single-call twin k: 2 sample(s), at most 1 level(s) apart, SSIM at least 0.9995 "
        "(1 - SSIM 0.0005) (band: 2 levels, SSIM 0.999)")


def test_the_lossless_floor_beside_a_parallel_cell_says_when_it_is_not_measured_and_its_interval_only_when_known(
        outputs: RunFactory, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import assess.statistics.floor
    from assess.statistics.floor import Floor
    from assess.statistics.parity import floor_beside

    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor")
    outputs.run(sweep, "1_ulysses", _parallel(ULYSSES), overrides=["parallel=ulysses"])  # no twin, no lossless sibling
    score([sweep], db, metrics=["psnr"])
    key = cell_key_of(_parallel(ULYSSES))
    with Index.open(db) as index:
        assert floor_beside(index, cell_key_of(make_cell())) is None  # no parity rows
        assert floor_beside(index, key) == \
            "lossless floor: not measured (a lossless sibling of the anchor scored on ssim: `assess floor`)"
        one = Floor("ssim", 0.002, None, 1, "attention=sdpa", "a")  # one prompt: no interval
        monkeypatch.setattr(assess.statistics.floor, "measure", lambda *a: {"ssim": one})
        assert floor_beside(index, key) == "lossless floor: 1 - SSIM 0.002 on attention=sdpa against the anchor, 1 prompt(s)"
