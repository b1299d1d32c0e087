"""A run's fixed cost: what a process does once per cell is done once, not twice (issue 22).

The counts come from the real `python -m render` in a subprocess, with the functions counted wrapped before
anything imports them; no timing is asserted (benchmarks/startup.py measures the time)."""

from __future__ import annotations

import pytest
import json
import os
import subprocess
import sys
from pathlib import Path

from render.compose.splits import load_prompts

# `python -m render <argv>`, counting cells built (render.cell.build_job), cells composed (Hydra's
# load_sweep_config), configs Hydra merged from scratch (its _compose_config_from_defaults_list: what
# render.compose.composition does not serve), images hashed, run directories' samples read by the sample store, fsyncs
# of samples.jsonl and git calls (the provenance run.json records); the counts go to COUNTS.json.
COUNTING = r'''
import collections, json, os, runpy, subprocess, sys
import render.cell, render.rundir.digests, render.rundir.store
from hydra._internal.config_loader_impl import ConfigLoaderImpl

counts = collections.Counter()

def counted(name, function):
    def wrapper(*args, **kwargs):
        counts[name] += 1
        return function(*args, **kwargs)
    return wrapper

render.cell.build_job = counted("build_job", render.cell.build_job)
ConfigLoaderImpl.load_sweep_config = counted("compose_cell", ConfigLoaderImpl.load_sweep_config)
ConfigLoaderImpl._compose_config_from_defaults_list = counted("merge", ConfigLoaderImpl._compose_config_from_defaults_list)
render.rundir.digests.file_digest = counted("image_hash", render.rundir.digests.file_digest)
render.rundir.store.file_digest = counted("image_hash", render.rundir.store.file_digest)
render.rundir.store.read_samples = counted("store_reads", render.rundir.store.read_samples)
fsync = os.fsync
def counted_fsync(fd):
    if os.readlink(f"/proc/self/fd/{fd}").endswith("samples.jsonl"):
        counts["samples_fsync"] += 1
    return fsync(fd)
os.fsync = counted_fsync
run = subprocess.run
def counted_run(args, *rest, **kwargs):
    if args and args[0] == "git":
        counts["git"] += 1
    return run(args, *rest, **kwargs)
subprocess.run = counted_run
sys.argv = ["render", *sys.argv[1:]]
try:
    runpy.run_module("render", run_name="__main__", alter_sys=True)
finally:
    counts["diffusers_imported"] = int("diffusers" in sys.modules)
    with open("COUNTS.json", "w") as f:
        json.dump(counts, f)
'''

CELL = ["model=tiny", "device=cpu", "prompts=dev", "prompts.limit=1", "render_anchor=false"]


def counted_render(*args: str, cwd: Path) -> dict[str, int]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "0"}
    done = subprocess.run([sys.executable, "-c", COUNTING, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((cwd / "COUNTS.json").read_text())


@pytest.mark.slow
def test_an_in_process_sweep_composes_and_checks_each_cell_once(tiny_cache: Path, tmp_path: Path) -> None:
    counts = counted_render("-m", *CELL, "steps=1,2,3", f"out_root={tmp_path / 'out'}", cwd=tmp_path)
    assert counts["compose_cell"] == 3  # the sweeper's preflight composes; the launcher takes its configs
    assert counts["merge"] == 1  # the three cells differ in a value only: one merge serves the master and all three
    assert counts["build_job"] == 3  # each cell's job is the one its preflight passed
    assert counts["git"] <= 2  # the project's git state, read once per process (rev-parse, status)
    again = counted_render("-m", *CELL, "steps=1,2,3", f"out_root={tmp_path / 'out'}", cwd=tmp_path)
    assert (again["compose_cell"], again["build_job"]) == (3, 3)  # a do-nothing re-run: the same, nothing twice


@pytest.mark.slow
def test_a_single_run_checks_its_cell_once(tiny_cache: Path, tmp_path: Path) -> None:
    counts = counted_render(*CELL, "steps=1", f"out_root={tmp_path / 'out'}", cwd=tmp_path)
    assert counts["build_job"] == 1  # the preflight callback's job is the one the run renders
    assert counts["merge"] == 1  # Hydra's get_mode composition and the run's are one


@pytest.mark.slow
def test_a_cell_does_not_read_its_own_samples_again_for_every_sample(tiny_cache: Path, tmp_path: Path) -> None:
    cell = [*CELL[:-2], "prompts.limit=6", "render_anchor=false"]
    counts = counted_render(*cell, "steps=1", f"out_root={tmp_path / 'out'}", cwd=tmp_path)
    assert counts["samples_fsync"] == 6  # each rendered sample is durable when recorded
    assert counts["store_reads"] <= 3  # not once per sample: its samples.jsonl is read again only when changed


@pytest.mark.slow
def test_a_do_nothing_rerun_links_in_one_write_a_cell_and_hashes_no_image_twice(tiny_cache: Path, tmp_path: Path) -> None:
    cell = [*CELL[:-2], "prompts.limit=4", "render_anchor=false", "steps=1,2,3", f"out_root={tmp_path / 'out'}"]
    counted_render("-m", *cell, cwd=tmp_path)
    for image in (tmp_path / "out").rglob("*.png"):  # finished a while ago: past the timestamp tick
        stat = image.stat()
        os.utime(image, ns=(stat.st_atime_ns - 10**10, stat.st_mtime_ns - 10**10))
    first = counted_render("-m", *cell, cwd=tmp_path)
    assert first["samples_fsync"] == 3  # 12 samples linked into 3 new run directories: one write and fsync a cell
    assert first["image_hash"] == 12  # each verified by content before reuse...
    again = counted_render("-m", *cell, cwd=tmp_path)
    assert again.get("image_hash", 0) == 0  # ...once: a file in a state already hashed is not read again
    assert again["samples_fsync"] == 3


def test_a_prompt_file_edited_between_reads_is_read_again(tmp_path: Path) -> None:
    manifest = tmp_path / "split.jsonl"
    manifest.write_text(json.dumps({"id": "p0", "text": "a red cube"}) + "\n")
    assert [p.text for p in load_prompts(str(manifest))] == ["a red cube"]
    manifest.write_text(json.dumps({"id": "p0", "text": "a tan cube"}) + "\n")  # the same size: the mtime tells
    stat = manifest.stat()
    os.utime(manifest, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert [p.text for p in load_prompts(str(manifest))] == ["a tan cube"]
    first = load_prompts(str(manifest))
    first.clear()  # a caller's list is its own: the next read is whole
    assert len(load_prompts(str(manifest))) == 1


@pytest.mark.slow
def test_a_rerun_of_a_finished_sweep_asks_nothing_of_the_machine_and_imports_no_diffusers(tiny_cache: Path,
                                                                                          tmp_path: Path) -> None:
    # cache=fbcache makes preflight inspect the pipeline class (does its transformer take cache hooks?): an import
    # of diffusers, which a cell with nothing to render does not need
    cell = [*CELL[:-2], "prompts.limit=2", "render_anchor=true", "cache=fbcache", "steps=2,3", f"out_root={tmp_path / 'out'}"]
    assert counted_render("-m", *cell, cwd=tmp_path)["diffusers_imported"] == 1  # it renders
    again = counted_render("-m", *cell, cwd=tmp_path)
    assert again.get("diffusers_imported", 0) == 0 and again["build_job"] == 2  # each cell still keyed and checked
    (next((tmp_path / "out").rglob("*.png"))).write_bytes(b"damaged")  # one sample to render again: checked in full
    assert counted_render("-m", *cell, cwd=tmp_path)["diffusers_imported"] == 1
