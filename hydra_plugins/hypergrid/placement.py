"""Spread a sweep's cells over jobs: grouped by model (each job loads each model once), balanced by cost."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from omegaconf import DictConfig, OmegaConf

from render.cell import width_of

DEFAULT_S_PER_STEP = 1.0  # assumed when the output root holds no history for the model


@dataclass(frozen=True)
class CellSpec:
    """One job of the sweep as the launcher sees it (works for any Hydra app, not only render)."""

    overrides: tuple[str, ...]
    num: int
    run_dir: Path  # the job's output folder (sweep dir / subdir)
    model: str  # the config's model.name, or "" for apps without one
    steps: int
    samples: int
    gpus: int = 1  # devices one run of the cell holds: a parallel cell's width (render.axes.parallel)

    @property
    def cost(self) -> int:
        return self.steps * self.samples


def _select(config: DictConfig, key: str, default: Any) -> Any:
    value = OmegaConf.select(config, key, default=default, throw_on_missing=False)
    return default if value is None else value


def cell_spec(overrides: Sequence[str], config: DictConfig) -> CellSpec:
    seeds = _select(config, "seed", 0)
    n_seeds = len(seeds) if OmegaConf.is_list(seeds) or isinstance(seeds, list) else 1
    prompts = _select(config, "prompts.limit", None) or _count_prompts(config)
    run_dir = (Path(str(config.hydra.sweep.dir)) / str(config.hydra.sweep.subdir)).absolute()
    parallel = _select(config, "parallel", None)  # absent in other apps: one device
    gpus = width_of(OmegaConf.to_container(parallel, resolve=True)) if parallel is not None else 1  # type: ignore[arg-type]
    return CellSpec(tuple(overrides), int(config.hydra.job.num), run_dir, str(_select(config, "model.name", "")),
                    int(_select(config, "steps", _select(config, "model.steps", 1))), prompts * n_seeds, gpus)


def slots(gpus: Sequence[int], width: int) -> list[tuple[int, ...]]:
    """GPUs as disjoint slots of `width`: one job per slot, so no GPU is ever shared by two running cells."""
    if width > len(gpus):
        raise ValueError(f"a cell of the sweep is {width} GPUs wide and the launcher has {len(gpus)} "
                         f"({', '.join(map(str, gpus))}); valid widths are 1 to {len(gpus)} (hydra.launcher.gpus=[...])")
    return [tuple(gpus[i:i + width]) for i in range(0, len(gpus) - width + 1, width)]


def by_width(cells: Sequence[CellSpec]) -> dict[int, list[CellSpec]]:
    """The sweep's cells by the GPUs each holds, widest first."""
    groups: dict[int, list[CellSpec]] = {}
    for cell in sorted(cells, key=lambda c: -c.gpus):
        groups.setdefault(cell.gpus, []).append(cell)
    return groups


def allot(cells: Sequence[CellSpec], gpus: int) -> dict[int, int] | None:
    """Slots per width that run every width at once on `gpus` GPUs (a slot of width w holds w of them): one slot
    each to start, then each GPU left goes, a slot at a time, to the width whose cells have the most work per
    slot (and a cell to fill the slot). None when the widths do not fit beside each other, a slot each."""
    groups = by_width(cells)
    if sum(groups) > gpus:
        return None
    count = dict.fromkeys(groups, 1)
    free = gpus - sum(groups)
    work = {w: sum(c.cost for c in group) for w, group in groups.items()}
    while fits := [w for w in groups if w <= free and count[w] < len(groups[w])]:
        width = max(fits, key=lambda w: (work[w] / count[w], w))
        count[width] += 1
        free -= width
    return count


def place(cells: Sequence[CellSpec], gpus: Sequence[int]) -> list[tuple[tuple[int, ...], list[CellSpec]]]:
    """Each job of one machine: its GPUs and its cells, no GPU in two jobs. Cells of different widths run side by
    side in slots of their own width (allot); when the widths do not fit beside each other, every slot is as wide
    as the widest cell and a narrower cell leaves the rest of its slot idle."""
    count = allot(cells, len(gpus))
    if count is None:
        places = slots(gpus, max(c.gpus for c in cells))
        return list(zip(places, plan_batches(cells, len(places))))
    jobs: list[tuple[tuple[int, ...], list[CellSpec]]] = []
    start = 0
    for width, group in by_width(cells).items():
        places = slots(gpus[start:start + width * count[width]], width)
        start += width * count[width]
        jobs += zip(places, plan_batches(group, count[width]))
    return jobs


def _count_prompts(config: DictConfig) -> int:
    prompts = _select(config, "prompts", None)
    if not prompts or not prompts.get("file"):
        return 1
    try:
        from render.compose.splits import load_split

        return len(load_split(prompts))
    except Exception:  # noqa: BLE001 - a cost estimate, not a check (preflight checks the file)
        return 1


def plan_batches(cells: Sequence[CellSpec], n_jobs: int) -> list[list[CellSpec]]:
    """At most `n_jobs` non-empty batches, balanced by cost, each loading as few models as it can.

    Models are placed in order of their total cost, each model's cells costliest first. A cell joins
    a batch that already loads its model while that batch stays within an even share of the total
    cost; otherwise it goes to the least-loaded batch (an idle GPU before a second model load).
    """
    batches: list[list[CellSpec]] = [[] for _ in range(max(1, min(n_jobs, len(cells))))]
    loads = [0] * len(batches)
    share = sum(c.cost for c in cells) / len(batches)
    totals: Counter[str] = Counter()
    for cell in cells:
        totals[cell.model] += cell.cost
    for cell in sorted(cells, key=lambda c: (-totals[c.model], c.model, -c.cost, c.num)):
        with_model = [i for i, batch in enumerate(batches)
                      if any(c.model == cell.model for c in batch) and loads[i] + cell.cost <= share]
        target = min(with_model or range(len(batches)), key=lambda i: loads[i])
        batches[target].append(cell)
        loads[target] += cell.cost
    return [sorted(b, key=lambda c: (c.model, c.num)) for b in batches if b]


def chunk_batches(batches: list[list[CellSpec]], cells_per_job: int | None) -> list[list[CellSpec]]:
    """Split each batch into jobs of at most `cells_per_job` cells (same model order kept)."""
    if not cells_per_job:
        return batches
    return [batch[i:i + cells_per_job] for batch in batches for i in range(0, len(batch), cells_per_job)]


def seconds_per_step(out_root: Path, model: str) -> float:
    """Median s/step of this model's finished samples known to the output root (the history), else a default."""
    from render.rundir import scan_runs

    values = [s.s_per_step for run in scan_runs(out_root) if run.cell["model"]["name"] == model
              for s in run.samples if s.reused_from is None and not s.warmup and s.s_per_step is not None]
    return statistics.median(values) if values else DEFAULT_S_PER_STEP


def timeout_minutes(batch: Sequence[CellSpec], s_per_step: float, margin: float = 2.0, load_min: float = 10.0) -> int:
    """A job's time limit derived from its cost: steps x samples x s/step, with margin and load time."""
    return int(math.ceil(margin * sum(c.cost for c in batch) * s_per_step / 60 + load_min))
