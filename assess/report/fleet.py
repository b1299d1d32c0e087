"""The fleet question: given N GPUs and a sweep's measured cells, which arrangement gives the lowest latency per image,
and which the most images per second, at parity.

Two arrangements of N GPUs, from the cells as measured (assess.report.throughput):

- one cell over several GPUs (`parallel=`, width w): each image waits its latency; N // w replicas of it run side
  by side;
- N // w replicas of a cell of width w at its batch (batch=1 is the width-1 cell itself): the fleet renders
  N // w times one replica's images/s.

The lowest latency is the cell whose image waits least (a parallel cell when splitting one image over GPUs pays);
the highest throughput is the arrangement with the most images/s over the whole fleet (usually replicas of the
batched width-1 cell). Only cells at parity under the sweep's rule (its report's verdict table: assess.report.write
sweep_table) are candidates; without any, every measured cell is, and the answer says so. Each figure carries its
95 % interval, scaled by the replicas (they are independent copies of the same measurement).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from assess.errors import AssessError
from assess.report.throughput import Figure, Throughput, cell_throughput


@dataclass(frozen=True)
class Arrangement:
    label: str
    cell_key: str
    width: int
    batch: int
    replicas: int
    latency: Figure  # s an image waits (its call)
    images_per_s: Figure  # the whole fleet's
    gpu_s_per_image: Figure
    peak_mem_bytes: int | None

    @property
    def how(self) -> str:
        over = f"one cell over {self.width} GPUs" if self.width > 1 else "one GPU a replica"
        return f"{self.replicas} replica(s) of {self.label} ({over}, batch {self.batch})"

    def as_dict(self) -> dict[str, Any]:
        def fig(f: Figure) -> dict[str, float | None]:
            return {"value": f.value, "low": f.low, "high": f.high}

        return {"label": self.label, "cell_key": self.cell_key, "width": self.width, "batch": self.batch,
                "replicas": self.replicas, "latency_s": fig(self.latency), "images_per_s": fig(self.images_per_s),
                "gpu_s_per_image": fig(self.gpu_s_per_image), "peak_mem_bytes": self.peak_mem_bytes}


@dataclass(frozen=True)
class FleetAnswer:
    gpus: int
    at_parity: bool  # False: no cell was at parity, every measured cell was a candidate
    rule: str
    lowest_latency: Arrangement
    highest_throughput: Arrangement
    candidates: list[Arrangement]

    def lines(self) -> list[str]:
        lat, thr = self.lowest_latency, self.highest_throughput
        scope = f"cells at parity ({self.rule})" if self.at_parity else \
            f"no cell at parity ({self.rule}): every measured cell, parity unknown"
        out = [f"fleet of {self.gpus} GPU(s), over {len(self.candidates)} {scope}:",
               f"  lowest latency per image: {lat.how}: {lat.latency.text()} s per image, "
               f"{lat.images_per_s.text()} images/s over the fleet",
               f"  highest throughput: {thr.how}: {thr.images_per_s.text()} images/s over the fleet, "
               f"{thr.gpu_s_per_image.text()} GPU-s/image, {thr.latency.text()} s per image"]
        if lat.cell_key == thr.cell_key:
            out.append(f"pick: {thr.label} for either goal")
        else:
            out.append(f"pick: {lat.label} when a user waits on each image (interactive serving, a latency SLO); "
                       f"{thr.label} for the most images per GPU-hour (offline or batch rendering)")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "at_parity": self.at_parity, "rule": self.rule,
                "lowest_latency": self.lowest_latency.as_dict(), "highest_throughput": self.highest_throughput.as_dict(),
                "candidates": [c.as_dict() for c in self.candidates]}


def arrange(t: Throughput, label: str, gpus: int) -> Arrangement | None:
    """The cell `t` replicated over `gpus` GPUs (None: one replica does not fit)."""
    replicas = gpus // t.width
    if replicas < 1:
        return None

    def times(f: Figure) -> Figure:
        return Figure(f.value * replicas, *(None if x is None else x * replicas for x in (f.low, f.high)))

    return Arrangement(label, t.cell_key, t.width, t.batch, replicas, t.latency, times(t.images_per_s),
                       t.gpu_s_per_image, t.peak_mem_bytes)


def fleet(sweeps: Sequence[Path | str], db: Path | str, gpus: int) -> FleetAnswer:
    """The fleet answer for `gpus` GPUs over the sweeps' cells (module doc); AssessError when none is measured."""
    from assess.index.database import Index
    from assess.report.write import sweep_table

    if gpus < 1:
        raise AssessError(f"--gpus {gpus}: the fleet's GPUs, at least 1")
    table = sweep_table(sweeps, db)
    if table is None:
        raise AssessError(f"no run of {', '.join(map(str, sweeps))} is in the index {db}: run `assess score` on it first")
    rows = [r for r in table["rows"] if not r["is_anchor"]]
    parity = [r for r in rows if r["verdict"] == "parity"]
    chosen = parity or rows
    with Index.open(db, create=False) as index:
        candidates = []
        for row in chosen:
            measured = cell_throughput(index, row["cell_key"])
            placed = measured and arrange(measured, row["label"], gpus)
            if placed:
                candidates.append(placed)
    if not candidates:
        widths = "" if not chosen else " (or every one is wider than the fleet)"
        raise AssessError(f"no cell of {', '.join(map(str, sweeps))} has a warm latency to arrange{widths}")
    lowest = min(candidates, key=lambda a: (a.latency.value, -a.images_per_s.value))
    highest = max(candidates, key=lambda a: (a.images_per_s.value, -a.latency.value))
    return FleetAnswer(gpus, bool(parity), str(table.get("rule", "")), lowest, highest, candidates)
