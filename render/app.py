"""The task a Hydra job runs: build the cell's job, render it into Hydra's output folder."""

from __future__ import annotations

import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from render.timing.interleave import CURRENT
from render.run.loader import PIPELINES
from render.run.preflight import checked_job
from render.rundir import FAILED, CellState, sample_store
from render.run.runner import CellResult, run_job
from render.run.signals import Cancelled, cancel_on_signals
from render.rundir.redact import shortened, shown


def render_task(cfg: DictConfig) -> list[dict[str, Any]]:
    """Render the composed cell into the current Hydra output folder; return one summary per run folder."""
    hydra_cfg = HydraConfig.get()
    job = checked_job(cfg, list(hydra_cfg.overrides.task))
    launcher = str(hydra_cfg.launcher.get("_target_", "")).rsplit(".", 1)[-1] or "basic"
    results = run_job(job, Path(hydra_cfg.runtime.output_dir), store=sample_store(job.out_root), pipelines=PIPELINES,
                      overrides=list(hydra_cfg.overrides.task), launcher=launcher, defer=CURRENT.get())
    if hydra_cfg.mode == RunMode.RUN:
        print_summary(results)
        if any(r.status == CellState.FAILED for r in results):
            sys.exit(1)
    return [r.__dict__ for r in results]  # live: a cell an interleaved sweep renders later completes its own


def failed_line(result: dict[str, Any]) -> str:
    """A failed cell's line (a single run's summary and a sweep's alike): what failed, why, where to look."""
    message = shortened(str(result['message']))  # FAILED.json keeps it whole
    return f"{shortened(str(result['describe']))}: {result['category']}: {message}\n        see {Path(result['run_dir']) / FAILED}"


def print_summary(results: list[CellResult]) -> None:
    """One line per cell, named by its overrides (`describe`: render.rundir.cell_label): what happened, where to look."""
    for r in results:
        if r.status == CellState.DONE:
            line = f"done    {r.describe}: {r.n_rendered} rendered, {r.n_reused} reused  {r.run_dir}"
        else:
            line = f"FAILED  {failed_line(r.__dict__)}"
        print(shown(line))


@contextmanager
def cancellable() -> Iterator[None]:
    """SIGTERM (kill, schedulers) and SIGINT (Ctrl-C) become `Cancelled`, recorded as FAILED.json `cancelled` by
    the cell they interrupt; then the process ends with 128 + the signal number."""
    try:
        with cancel_on_signals():
            yield
    except Cancelled as error:
        print(f"cancelled: {error}; the interrupted cell records it in its FAILED.json", file=sys.stderr)
        raise SystemExit(error.exit_code) from None
    except KeyboardInterrupt:  # a SIGINT that came before the handlers were in place
        print("cancelled: interrupted (SIGINT); the interrupted cell records it in its FAILED.json", file=sys.stderr)
        raise SystemExit(128 + signal.SIGINT) from None
