"""GPU-time budget of an experiment: what was spent (measured from its samples) and what a sweep will
cost (estimated from history before anything launches). Files are the source of truth, not the index."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from render.errors import RenderError
from render.rundir import RunDir, SampleRecord, read_lines, scan_runs, text_hash


class BudgetExceeded(RenderError, ValueError):
    """The sweep's estimated cost does not fit in what is left of the budget."""


def identity(record: SampleRecord) -> tuple[str, str | None, int]:
    """A sample by content: (cell key, prompt text hash, seed)."""
    return record.cell_key, record.prompt_sha or (text_hash(record.prompt) if record.prompt else record.prompt_id), record.seed


@dataclass(frozen=True)
class History:
    """Every run known to an output root (under it and registered elsewhere), read once."""

    runs: list[RunDir]

    @classmethod
    def scan(cls, out_root: Path) -> History:
        return cls(scan_runs(out_root))

    def samples(self, match: Any) -> Iterable[dict[str, Any]]:
        """The rendered (not linked) samples of the runs whose run.json `match` accepts."""
        for run in self.runs:
            if match(run.run):
                yield from (s.as_dict() for s in run.samples if s.reused_from is None)


def spent_gpu_seconds(out_root: Path, experiment: str, history: History | None = None) -> float:
    """The GPU time of every sample the experiment's runs use, each once, wherever and under whatever flags
    it was rendered: a sample linked from a run outside the experiment costs what its rendering cost."""
    history = history or History.scan(out_root)
    cost: dict[tuple[str, str | None, int], float] = {}
    used: set[tuple[str, str | None, int]] = set()
    for run in history.runs:
        mine = ((run.run.get("config") or {}).get("experiment") or {}).get("name") == experiment
        for record in run.samples:
            if record.reused_from is None:
                cost.setdefault(identity(record), (record.latency_s or 0.0) + (record.load_s or 0.0))
            if mine:
                used.add(identity(record))
    return sum(cost.get(i, 0.0) for i in used)


RESERVATIONS = "reservations.jsonl"


def reserved_seconds(folder: Path) -> float:
    """What launches still running have reserved (a reservation ends with its release or its process)."""
    from render.rundir import writer_state

    entries, released = [], set()
    for entry in read_lines(folder / RESERVATIONS):
        if "release" in entry:
            released.add(entry["release"])
        else:
            entries.append(entry)
    return sum(e["seconds"] for e in entries if e["id"] not in released and writer_state(e, ask_slurm=False)[0] == "running")


def reserve(folder: Path, seconds: float) -> None:
    """Reserve `seconds` of the budget for this process's launch; released when the process ends."""
    import atexit
    import secrets

    from render.rundir import append_record, host_identity, now_iso

    entry = {"id": secrets.token_hex(6), "seconds": seconds, **host_identity(), "started_at": now_iso()}
    append_record(folder / RESERVATIONS, entry)
    atexit.register(lambda: append_record(folder / RESERVATIONS, {"release": entry["id"], "released_at": now_iso()}))


def seconds_per_sample(out_root: Path, model: str, height: int, width: int, device_kind: str, steps: int,
                       cell_key: str | None = None, history: History | None = None) -> float | None:
    """The cell's own median warm latency when it has history; else a latency = a + b*steps fit over the
    model's samples at this resolution on this device kind; None without any history."""
    history = history or History.scan(out_root)
    if cell_key:
        own = [r["latency_s"] for r in history.samples(lambda m: m.get("cell_key") == cell_key) if not r.get("warmup")]
        if own:
            return statistics.median(own)

    def same_setting(meta: dict[str, Any]) -> bool:
        cell = meta.get("cell") or {}
        return (cell.get("model", {}).get("name"), cell.get("height"), cell.get("width"), cell.get("device_kind")) == (model, height, width, device_kind)

    points = [(r["steps"], r["latency_s"]) for r in history.samples(same_setting) if not r.get("warmup")]
    if not points:
        return None
    by_steps: dict[int, list[float]] = {}
    for s, latency in points:
        by_steps.setdefault(s, []).append(latency)
    medians = {s: statistics.median(v) for s, v in by_steps.items()}
    if len(medians) == 1:
        ((s, latency),) = medians.items()
        return latency * steps / s
    slope, intercept = statistics.linear_regression(list(medians), list(medians.values()))
    return max(intercept + slope * steps, min(medians.values()) * 0.1)


def load_seconds(model: str, history: History) -> float:
    """Median recorded load time of the model (0 without history: the measurement then loads it)."""
    loads = [r["load_s"] for r in history.samples(lambda m: ((m.get("cell") or {}).get("model") or {}).get("name") == model)
             if r.get("load_s")]
    return statistics.median(loads) if loads else 0.0


@dataclass(frozen=True)
class Estimate:
    seconds: float
    measured_cells: int  # cells estimated from a one-sample measurement (no history)


def estimate_jobs(jobs: Sequence[Any], pending: dict[str, int], out_root: Path, measure: Any = None,
                  history: History | None = None) -> Estimate:
    """Seconds the jobs' pending samples will take. `measure(job) -> seconds per sample` is asked for
    cells without history (a one-sample preflight measurement)."""
    history = history or History.scan(out_root)
    total, measured = 0.0, 0
    for model in {job.cell.model.name for job in jobs if pending.get(job.cell.key)}:
        total += load_seconds(model, history)  # each process loads each model once
    for job in jobs:
        n = pending.get(job.cell.key, 0)
        if n == 0:
            continue
        c = job.cell
        per_sample = seconds_per_sample(out_root, c.model.name, c.height, c.width, c.device_kind, c.steps, c.key, history)
        if per_sample is None:
            if measure is None:
                raise BudgetExceeded(f"no history to estimate cell {c.describe()} and no measurement available")
            per_sample, measured = measure(job), measured + 1
        total += n * per_sample
    return Estimate(total, measured)


def check_budget(experiment: Any, spent_s: float, estimate: Estimate) -> None:
    """Refuse a sweep whose estimate does not fit: the reserve is only for the final."""
    budget = experiment.budget
    ceiling_h = budget.gpu_hours - (0.0 if experiment.final else budget.reserve_gpu_hours)
    left_s = ceiling_h * 3600 - spent_s
    if estimate.seconds > left_s:
        price = f" (${estimate.seconds / 3600 * budget.price_per_gpu_hour:.2f})" if budget.price_per_gpu_hour else ""
        reserve = "" if experiment.final else f", reserve {budget.reserve_gpu_hours:.4f} h kept for the final"
        raise BudgetExceeded(
            f"experiment {experiment.name}: this sweep needs an estimated {estimate.seconds / 3600:.4f} GPU-hours{price}, "
            f"but only {max(left_s, 0) / 3600:.4f} are left (spent {spent_s / 3600:.4f} of {budget.gpu_hours:.4f}{reserve}); "
            "nothing was launched. Shrink the sweep (fewer cells, a lower prompts.limit) or raise experiment.budget.gpu_hours")
