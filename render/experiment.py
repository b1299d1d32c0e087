"""The render-side guards of an experiment (a named climb): the locked holdout, frozen anchors, the final.

`assess climb <name> --final` claims FINAL.json once; only then, and only with experiment.final=true,
does the runner render the experiment's holdout prompts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from render.errors import RenderError
from render.prompts import load_prompts
from render.rundir import now_iso

FINAL = "FINAL.json"


class ExperimentGuard(RenderError, ValueError):
    """A sweep the experiment's rules forbid; nothing was launched or written."""


class FinalAlreadyClaimed(RenderError, RuntimeError):
    """The experiment's final holdout run was already claimed."""


def experiment_dir(out_root: Path, name: str) -> Path:
    return out_root / "experiments" / name


def final_record(out_root: Path, name: str) -> dict[str, Any] | None:
    path = experiment_dir(out_root, name) / FINAL
    return json.loads(path.read_text()) if path.exists() else None


def claim_final(out_root: Path, name: str, payload: dict[str, Any]) -> Path:
    """Create FINAL.json exactly once (O_EXCL): a second final is refused with the date of the first."""
    path = experiment_dir(out_root, name) / FINAL
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        first = final_record(out_root, name) or {}
        raise FinalAlreadyClaimed(f"experiment {name}: the final holdout run was already made on {first.get('claimed_at', '?')} "
                                  f"({path}); the holdout is spent and cannot be rendered again") from None
    with os.fdopen(fd, "w") as f:
        json.dump({"experiment": name, "claimed_at": now_iso(), **payload}, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    return path


def check_experiment(cfg: Any, overrides: Sequence[str]) -> None:
    """Raise ExperimentGuard when this cell breaks its experiment's rules."""
    experiment = cfg.get("experiment")
    if experiment is None:
        return
    name = experiment.name
    anchored = [o for o in overrides if o.lstrip("+~").startswith("model.anchor")]
    if anchored:
        raise ExperimentGuard(f"experiment {name}: the anchor is frozen; remove {' '.join(anchored)} "
                              "(a different reference needs a new experiment)")
    dev, holdout = load_prompts(f"{experiment.dev}.jsonl"), load_prompts(f"{experiment.holdout}.jsonl")
    shared = {p.text.strip().lower() for p in dev} & {p.text.strip().lower() for p in holdout}
    if shared:
        raise ExperimentGuard(f"experiment {name}: prompts {experiment.dev} and {experiment.holdout} share texts, e.g. {sorted(shared)[0]!r}")
    if cfg.prompts.name == experiment.holdout or cfg.prompts.split == "holdout":
        out_root = Path(cfg.out_root).expanduser().resolve()
        if not experiment.final:
            raise ExperimentGuard(f"experiment {name}: prompts={cfg.prompts.name} is the locked holdout; "
                                  f"only `assess climb {name} --final` renders it, once")
        if final_record(out_root, name) is None:
            raise ExperimentGuard(f"experiment {name}: experiment.final=true without a claimed final; "
                                  f"run `assess climb {name} --final`")
