"""A sweep that cannot start fails with exit 2 and a message before anything is written; a cell's folder is
named by the cell's own overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_render


@pytest.mark.slow
def test_the_gpus_launcher_without_gpus_writes_nothing(tmp_path: Path) -> None:
    result = run_render("-m", "model=tiny", "steps=1,2", "hydra/launcher=gpus", f"out_root={tmp_path / 'out'}",
                        cwd=tmp_path, env_extra={"CUDA_VISIBLE_DEVICES": ""}, timeout=180)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "hydra/launcher=gpus found no CUDA GPU here" in result.stderr
    assert not (tmp_path / "out").exists()  # no SWEEP.json, no sweep folder: nothing for status to call aborted


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("sweep", [False, True], ids=["run", "sweep"])
def test_an_out_root_that_cannot_be_created_is_exit_2_naming_it(sweep: bool, tmp_path: Path) -> None:
    args = ["-m", "model=tiny", "steps=1,2"] if sweep else ["model=tiny"]
    result = run_render(*args, "out_root=/proc/x", cwd=tmp_path, timeout=180)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "out_root=/proc/x: cannot be created in /proc" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_cells_folder_holds_its_own_overrides_only(tiny_cache: Path, tmp_path: Path) -> None:
    result = run_render("-m", "model=tiny", "steps=1,2", f"out_root={tmp_path / 'elsewhere'}", "prompts=dev",
                        "prompts.limit=1", "render_anchor=false", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    (sweep,) = (tmp_path / "elsewhere" / "multirun").glob("*/*")
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == ["0_steps=1", "1_steps=2"]


def test_a_detached_ray_sweep_without_a_cluster_address_is_exit_2_before_anything_is_written(tmp_path: Path) -> None:
    """`wait=false` leaves the sweep to a cluster that outlives this process: a cluster started for the sweep would
    end with it, so the sweeper refuses before it connects, submits or writes anything."""
    result = run_render("-m", "model=tiny", "steps=1,2", "hydra/launcher=ray", "hydra.launcher.wait=false",
                        f"out_root={tmp_path / 'out'}", cwd=tmp_path, timeout=180)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "hydra.launcher.wait=false needs a running cluster (hydra.launcher.address=auto" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()
