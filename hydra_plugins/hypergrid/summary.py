"""The line a sweep ends with: how many of its cells are done, which failed and why.

A cell's job returns one result per run directory it wrote: the cell's own and, when the anchor's
samples were missing, the anchor's. The count is of cells (the sweep's jobs); a failed anchor is
listed apart and fails the command too, but never makes a cell count twice or count as not done.
"""

# No `from __future__ import annotations`: Hydra's plugin scan runs this module outside sys.modules,
# where dataclasses cannot resolve string annotations.
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from omegaconf import OmegaConf

from render.rundir import CellState


@dataclass
class SweepOutcome:
    cells: int = 0
    done: int = 0
    failed: list[str] = field(default_factory=list)  # one line (and where to look) per failed cell
    anchors_failed: list[str] = field(default_factory=list)


def _own_dir(ret: JobReturn) -> Path | None:
    """The cell's run directory (Hydra's output dir for the job), when the return knows it."""
    hydra_cfg = getattr(ret, "hydra_cfg", None)
    output_dir = OmegaConf.select(hydra_cfg, "hydra.runtime.output_dir") if hydra_cfg is not None else None
    return Path(str(output_dir)).resolve() if output_dir else None


def _line(result: dict[str, Any]) -> str:
    from render.app import failed_line

    return f"  {failed_line(result)}"


def outcome(returns: Sequence[JobReturn]) -> SweepOutcome:
    out = SweepOutcome(cells=len(returns))
    for ret in returns:
        if ret.status == JobStatus.FAILED:
            out.failed.append(f"  {' '.join(filter_overrides(ret.overrides or []))}: crashed: {ret._return_value!r}")
            continue
        results = [r for r in (ret.return_value if isinstance(ret.return_value, list) else []) if isinstance(r, dict)]
        own_dir = _own_dir(ret)
        own = [r for r in results if own_dir is None or Path(r["run_dir"]).resolve() == own_dir]
        anchors = [r for r in results if r not in own]
        out.anchors_failed += [_line(r) for r in anchors if r.get("status") == CellState.FAILED]
        own_failed = [r for r in own if r.get("status") == CellState.FAILED]
        out.failed += [_line(r) for r in own_failed]
        out.done += not own_failed
    return out


def summarise(returns: Sequence[JobReturn], sweep_dir: Path, notes: Sequence[str] = ()) -> None:
    """Print how many cells are done, then `notes` (the side-by-side round's line) and the next command; exit 1
    listing every failed cell and anchor (each has its FAILED.json)."""
    out = outcome(returns)
    problems = out.failed + [f"  anchor {line.lstrip()}" for line in out.anchors_failed]
    print(f"sweep {sweep_dir}: {out.done} of {out.cells} cells done")
    for note in notes:
        print(note)
    if out.done:
        print(f"next: assess score {sweep_dir} && assess report {sweep_dir}")
    if problems:
        from render.run.preflight import exit_with

        anchors = f" and {len(out.anchors_failed)} anchor run(s)" if out.anchors_failed else ""
        exit_with(RuntimeError(f"{len(out.failed)} of {out.cells} cells{anchors} failed:\n" + "\n".join(problems)), code=1)
