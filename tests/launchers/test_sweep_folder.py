"""Issue 58, item 7: two different sweeps sent to one `hydra.sweep.dir` mixed silently (SWEEP.json then described
only the second). A folder that holds another sweep is refused in preflight (exit 2, nothing written), naming a
folder to use instead; the same sweep sent there again resumes (skip-if-done)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hydra_plugins.hypergrid.resume import other_sweep
from render import rundir
from tests.conftest import run_render


def recorded(folder: Path, *cells: list[str]) -> Path:
    """A SWEEP.json of these cells (their overrides), written by the contract's writer as the sweeper writes it."""
    folder.mkdir(parents=True)
    rundir.write_sweep(folder, "InProcessLauncher", [
        rundir.sweep_cell(num, overrides, f"{num}_{','.join(overrides)}", f"key{num}", "tiny", 2)
        for num, overrides in enumerate(cells)])
    return folder


def test_a_folder_of_another_sweep_is_refused_naming_a_free_one(tmp_path: Path) -> None:
    folder = recorded(tmp_path / "sw", ["steps=4", "cache=none"], ["steps=4", "cache=fbcache"])
    (tmp_path / "sw-2").mkdir()  # taken: the next free sibling is offered
    why = other_sweep(folder, [["steps=8"]])
    assert why == (f"hydra.sweep.dir={folder}: the folder already holds another sweep (steps=4 cache=none, steps=4 "
                   "cache=fbcache); this sweep's cells would mix with its runs and its SWEEP.json would describe only "
                   f"this one. Give a folder of its own: hydra.sweep.dir={tmp_path / 'sw-3'} (or leave "
                   "hydra.sweep.dir out for a new dated folder)")


def test_the_same_sweep_again_an_empty_folder_and_a_new_one_are_taken(tmp_path: Path) -> None:
    folder = recorded(tmp_path / "sw", ["steps=4", "cache=none"], ["steps=4", "cache=fbcache"])
    assert other_sweep(folder, [["steps=4", "cache=none"], ["steps=4", "cache=fbcache"]]) is None  # a re-run resumes
    (tmp_path / "empty").mkdir()
    assert other_sweep(tmp_path / "empty", [["steps=8"]]) is None
    assert other_sweep(tmp_path / "new", [["steps=8"]]) is None


@pytest.mark.slow
def test_a_second_sweep_into_the_first_ones_folder_exits_2_and_writes_nothing(tiny_cache: Path, tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    base = ("model=tiny", "render_anchor=false", "prompts.limit=1", f"hydra.sweep.dir={folder}")
    first = run_render("-m", "steps=1,2", *base, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    before = sorted((p.relative_to(folder), p.stat().st_mtime_ns) for p in folder.rglob("*"))
    other = run_render("-m", "steps=3", *base, cwd=tmp_path)
    assert other.returncode == 2, other.stderr[-2000:]
    assert re.search(rf"error: hydra.sweep.dir={re.escape(str(folder))}: the folder already holds another sweep "
                     r"\(steps=1 model=tiny, steps=2 model=tiny\)", other.stderr), other.stderr
    assert f"hydra.sweep.dir={tmp_path / 'sweep-2'}" in other.stderr
    assert sorted((p.relative_to(folder), p.stat().st_mtime_ns) for p in folder.rglob("*")) == before, "nothing written"
    again = run_render("-m", "steps=1,2", *base, cwd=tmp_path)  # the same sweep: resumed, nothing rendered again
    assert again.returncode == 0, again.stderr[-2000:]
    assert "2 of 2 cells done" in again.stdout, again.stdout
    assert [len(p.read_text().splitlines()) for p in sorted(folder.glob("*/samples.jsonl"))] == [1, 1], \
        "each sample once: the cells were not rendered again"
