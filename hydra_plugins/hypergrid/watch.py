"""Progress of a submitted sweep while its jobs run: cells done, failed and running out of the total.

Read from the cells' run directories (a terminal record, or run.json without one), so it counts
the same thing `assess status` does and needs nothing from the jobs themselves.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence, TextIO

from hydra_plugins.hypergrid.placement import CellSpec
from render.rundir import CellState


def cell_state(run_dir: Path) -> CellState:
    """DONE / FAILED (a terminal record), RUNNING (run.json without one), or PENDING (not started)."""
    from render.rundir import RUN_JSON, terminal_state

    return terminal_state(run_dir) or (CellState.RUNNING if (run_dir / RUN_JSON).exists() else CellState.PENDING)


def count_cells(cells: Sequence[CellSpec]) -> Counter:
    return Counter(cell_state(c.run_dir) for c in cells)


def watch(submitted: Sequence[tuple[Any, Sequence[CellSpec]]], *, poll_s: float = 2.0, file: TextIO | None = None,
          disable: bool | None = None) -> Counter:
    """Show a bar of the cells that ended, with done/failed/running counts, until every job has ended.

    `disable=None` shows it only on a terminal (tqdm's rule); the counts at the end are returned.
    """
    from tqdm import tqdm

    cells = [cell for _, batch in submitted for cell in batch]
    with tqdm(total=len(cells), desc="cells", unit="cell", file=file, disable=disable, dynamic_ncols=True) as bar:
        while True:
            finished = all(job.done() for job, _ in submitted)
            counts = count_cells(cells)
            bar.n = counts[CellState.DONE] + counts[CellState.FAILED]
            bar.set_postfix(done=counts[CellState.DONE], failed=counts[CellState.FAILED], running=counts[CellState.RUNNING],
                            refresh=False)
            bar.refresh()
            if finished:
                return counts
            time.sleep(poll_s)
