"""The render-side guards of an experiment (a named climb): the holdout locked by content, the anchor
frozen by content, one final by evidence.

`assess climb <name> --final` claims the final once (render.holdout keeps the evidence); only then, and
only with the claim's token, does the runner render the experiment's holdout, for the final's cells.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any, Sequence

from render.errors import RenderError
from render.holdout import (FINAL, FINALS, HoldoutLocked, experiment_dir, final_claim, option_prompts, record_claim,
                            registries)
from render.rundir import append_record, atomic_write_json, check_name, create_json, now_iso, read_lines, shared_texts

ANCHOR = "ANCHOR.json"


class ExperimentGuard(RenderError, ValueError):
    """A sweep the experiment's rules forbid; nothing was launched or written."""


class FinalAlreadyClaimed(RenderError, RuntimeError):
    """The experiment's final holdout run was already claimed."""


def final_record(out_root: Path, name: str) -> dict[str, Any] | None:
    """The experiment's claimed final: FINAL.json, or the copy kept in the registries when it was deleted."""
    path = experiment_dir(out_root, name) / FINAL
    if path.exists():
        return json.loads(path.read_text())
    return next((e for folder in registries(out_root) for e in read_lines(folder / FINALS) if e.get("experiment") == name), None)


def claim_final(out_root: Path, name: str, payload: dict[str, Any], holdout_content: str | None = None) -> dict[str, Any]:
    """Claim the final exactly once: refused when any record of a claim survives (FINAL.json, the out_root's
    or the user's registry); returns the claim with the token its commands must carry."""
    first = final_claim(out_root, name, holdout_content) if holdout_content else final_record(out_root, name)
    if first is not None:
        raise FinalAlreadyClaimed(f"experiment {name}: the final holdout run was already claimed on "
                                  f"{first.get('claimed_at', '?')}; the holdout is spent and cannot be rendered again")
    claim = {"experiment": name, "claimed_at": now_iso(), "holdout_content": holdout_content,
             "token": secrets.token_hex(8), **payload}
    path = experiment_dir(out_root, name) / FINAL
    try:
        create_json(path, claim)  # exclusive and whole: fails when another claim got there first
    except FileExistsError:
        raise FinalAlreadyClaimed(f"experiment {name}: the final holdout run was already claimed ({path}); "
                                  "the holdout is spent and cannot be rendered again") from None
    record_claim(out_root, claim)
    return claim


def frozen_anchor(out_root: Path, name: str) -> dict[str, Any] | None:
    """The anchor cell the experiment recorded at its first launch (ANCHOR.json, or the registries' copy)."""
    path = experiment_dir(out_root, name) / ANCHOR
    if path.is_file():
        return json.loads(path.read_text())
    for folder in registries(out_root):
        for entry in read_lines(folder / "anchors.jsonl"):
            if entry.get("experiment") == name and entry.get("out_root") in (None, str(out_root)):
                return entry
    return None


def check_anchor(out_root: Path, name: str, anchor: Any) -> None:
    """The anchor is frozen by content: a cell whose anchor differs from the recorded one is refused."""
    recorded = frozen_anchor(out_root, name)
    if recorded is not None and recorded["cell_key"] != anchor.key:
        raise ExperimentGuard(
            f"experiment {name}: the anchor is frozen, and this run's differs (an edited model config, or a same-named "
            f"option elsewhere on the search path).\n  recorded: {json.dumps(recorded['cell'], sort_keys=True)}\n"
            f"  this run: {json.dumps(anchor.canonical(), sort_keys=True)}\nA different reference needs a new experiment")


def record_anchor(out_root: Path, name: str, anchor: Any) -> None:
    """At an experiment's first launch, freeze its anchor (in its folder and the registries)."""
    if frozen_anchor(out_root, name) is not None:
        return
    entry = {"experiment": name, "out_root": str(out_root), "cell_key": anchor.key, "cell": anchor.canonical(),
             "recorded_at": now_iso()}
    atomic_write_json(experiment_dir(out_root, name) / ANCHOR, entry)
    for folder in registries(out_root):
        folder.mkdir(parents=True, exist_ok=True)
        append_record(folder / "anchors.jsonl", entry)


def check_experiment(cfg: Any, overrides: Sequence[str], job: Any) -> None:
    """Raise ExperimentGuard (or HoldoutLocked) when this cell breaks its experiment's rules. The holdout lock
    (render.holdout.check_holdout) holds for every render, with or without an experiment."""
    from render.holdout import check_holdout

    check_holdout(job, cfg)
    experiment = cfg.get("experiment")
    if experiment is None:
        return
    name = check_name(experiment.name, "experiment.name")
    anchored = [o for o in overrides if o.lstrip("+~").startswith("model.anchor")]
    if anchored:
        raise ExperimentGuard(f"experiment {name}: the anchor is frozen; remove {' '.join(anchored)} "
                              "(a different reference needs a new experiment)")
    (dev_file, dev), (holdout_file, holdout) = option_prompts(experiment.dev), option_prompts(experiment.holdout)
    shared = shared_texts([(p.id, p.text) for p in dev], [(p.id, p.text) for p in holdout])
    if shared:
        dev_id, holdout_id, text = shared[0]
        raise ExperimentGuard(f"experiment {name}: prompts {experiment.dev} ({dev_file}) and {experiment.holdout} "
                              f"({holdout_file}) share {len(shared)} text(s), e.g. {dev_id} = {holdout_id} ({text!r})")
    check_anchor(job.out_root, name, job.anchor)


def record_launch(jobs: Sequence[Any]) -> None:
    """What an experiment's first launch fixes for good: its anchor, and its holdout's reservation."""
    from render.holdout import register_holdout

    for job in jobs:
        experiment = job.config.get("experiment")
        if experiment:
            record_anchor(job.out_root, experiment["name"], job.anchor)
            register_holdout(job.out_root, experiment["name"], experiment["holdout"])


__all__ = ["ExperimentGuard", "FinalAlreadyClaimed", "HoldoutLocked", "check_experiment", "claim_final", "experiment_dir",
           "final_record", "record_launch"]
