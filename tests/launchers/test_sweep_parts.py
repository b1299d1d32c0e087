"""The launchers' parts that need no jobs: option schemas, the end-of-sweep count, the progress bar."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest

from render import rundir
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from hydra_plugins.hypergrid.placement import CellSpec
from hydra_plugins.hypergrid.config import BatchQueueConf, GpusLauncherConf, SlurmLauncherConf
from hydra_plugins.hypergrid.watch import count_cells, watch
from hydra_plugins.hypergrid.summary import outcome, summarise


def test_launcher_options_share_one_base() -> None:
    shared = {f.name for f in dataclasses.fields(BatchQueueConf)}
    for conf in (GpusLauncherConf, SlurmLauncherConf):
        assert issubclass(conf, BatchQueueConf) and shared <= {f.name for f in dataclasses.fields(conf)}
    assert GpusLauncherConf().signal_delay_s == 60 and SlurmLauncherConf().signal_delay_s == 120


def a_return(tmp_path: Path, *results: dict, own: str = "cell") -> JobReturn:
    ret = JobReturn(overrides=["steps=2"], status=JobStatus.COMPLETED, _return_value=list(results))
    ret.hydra_cfg = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(tmp_path / own)}}})
    return ret


def result(tmp_path: Path, folder: str, status: str) -> dict:
    extra = {"category": "error", "message": "boom"} if status == "failed" else {}
    return {"run_dir": tmp_path / folder, "describe": folder, "status": status, **extra}


def test_the_summary_counts_cells_not_run_folders(tmp_path: Path, capsys) -> None:
    returns = [
        a_return(tmp_path, result(tmp_path, "anchors/a", "done"), result(tmp_path, "cell", "done")),  # anchor rendered too
        a_return(tmp_path / "2", result(tmp_path / "2", "cell", "done")),
        a_return(tmp_path / "3", result(tmp_path / "3", "anchors/a", "failed"), result(tmp_path / "3", "cell", "done")),
        a_return(tmp_path / "4", result(tmp_path / "4", "cell", "failed")),
    ]
    out = outcome(returns)
    assert (out.cells, out.done, len(out.failed), len(out.anchors_failed)) == (4, 3, 1, 1)
    with pytest.raises(SystemExit) as exit_:
        summarise(returns, tmp_path)
    assert exit_.value.code == 1
    printed = capsys.readouterr()
    assert "3 of 4 cells done" in printed.out
    assert "1 of 4 cells and 1 anchor run(s) failed" in printed.err and "anchor anchors/a: error: boom" in printed.err


def test_a_finished_sweep_with_anchor_runs_is_all_done(tmp_path: Path, capsys) -> None:
    returns = [a_return(tmp_path, result(tmp_path, "anchors/a", "done"), result(tmp_path, "cell", "done"))]
    summarise(returns, tmp_path)
    assert "1 of 1 cells done" in capsys.readouterr().out


class FakeJob:
    def __init__(self, done_after: int) -> None:
        self.polls, self.done_after = 0, done_after

    def done(self) -> bool:
        self.polls += 1
        return self.polls > self.done_after


def cell(tmp_path: Path, name: str, *files: str) -> CellSpec:
    """A cell folder holding the given contract files, written as the renderer writes them."""
    run_dir = tmp_path / name
    run_dir.mkdir()
    for file in files:
        if file == rundir.DONE:
            rundir.write_done(run_dir, n_samples=0)
        elif file == rundir.FAILED:
            rundir.write_failed(run_dir, "error", "boom", "Traceback ...")
        else:
            (run_dir / file).write_text(json.dumps({}))
    return CellSpec(("steps=2",), 0, run_dir, "tiny", 2, 1)


def test_progress_shows_done_failed_and_running_cells(tmp_path: Path) -> None:
    cells = [cell(tmp_path, "a", "run.json", "DONE.json"), cell(tmp_path, "b", "run.json", "FAILED.json"),
             cell(tmp_path, "c", "run.json"), cell(tmp_path, "d")]
    assert count_cells(cells) == {"done": 1, "failed": 1, "running": 1, "pending": 1}
    job = FakeJob(done_after=2)
    stream = io.StringIO()
    counts = watch([(job, cells[:2]), (FakeJob(0), cells[2:])], poll_s=0, file=stream, disable=False)
    assert job.polls == 3, "the bar stops only when every job has ended"
    assert counts["done"] == 1
    assert "2/4" in stream.getvalue() and "done=1, failed=1, running=1" in stream.getvalue()
