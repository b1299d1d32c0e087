"""`assess export wandb`: the tracked runs (assess.export.selection) as W&B runs in offline mode.

Each run is written under `<dir>/wandb/offline-run-<time>-<id>` with its id fixed by its key (`wandb sync`
uploads them later, from a machine with access: a second offline run with the same id resumes, i.e. updates,
the same W&B run). W&B has no nested runs: a parent and its children share a `group` (the parent's key) and
`job_type` tells the kind. A ledger (`<dir>/wandb/hypergrid-export.json`: key -> content digest) makes a second
export of unchanged content write nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from assess.export.env import environ
from assess.export.errors import TrackerUnavailable
from assess.export.selection import KEY_TAG, Exported, TrackedRun
from render.rundir import atomic_write_json

LEDGER = "hypergrid-export.json"


def _wandb() -> Any:
    try:
        import wandb
    except ImportError as exc:
        raise TrackerUnavailable(f"W&B is not installed ({exc}): pip install 'hypergrid[wandb]'") from None
    return wandb


def run_id(tracked: TrackedRun) -> str:
    """The W&B run id of a tracked run: its key (32 hex digits: a valid, stable id)."""
    return tracked.key


def _artefact(wandb: Any, tracked: TrackedRun) -> Any:
    art = wandb.Artifact(f"{tracked.kind}-{tracked.key[:16]}", type=tracked.kind,
                         metadata={KEY_TAG: tracked.key, "name": tracked.name})
    for local, folder in tracked.artefacts:
        if local.is_dir():
            art.add_dir(str(local), name=folder)
        else:
            art.add_file(str(local), name=f"{folder}/{local.name}")
    return art


def _write(wandb: Any, tracked: TrackedRun, project: str, folder: Path) -> None:
    group = tracked.parent or tracked.key
    tags = {k.removeprefix("hypergrid."): v for k, v in tracked.tags.items()}  # W&B nests them under `hypergrid`
    config = {**tracked.params, "hypergrid": {**tags, "key": tracked.key, "parent": tracked.parent or ""}}
    run = wandb.init(mode="offline", dir=str(folder), project=project, id=run_id(tracked), name=tracked.name,
                     group=group, job_type=tracked.kind, config=config, tags=[tracked.kind], resume="allow",
                     reinit="create_new", settings=wandb.Settings(silent=True, console="off", x_disable_stats=True,
                                                                  x_disable_meta=True))
    try:
        run.log(tracked.metrics, step=0)
        if tracked.artefacts:
            run.log_artifact(_artefact(wandb, tracked))
    finally:
        run.finish()


def export_wandb(runs: list[TrackedRun], project: str, folder: Path) -> Exported:
    """Write the tracked runs as offline W&B runs under `folder`/wandb; unchanged ones are skipped."""
    wandb = _wandb()
    folder = folder.resolve()
    try:
        (folder / "wandb").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TrackerUnavailable(f"--dir {folder}: cannot write the W&B offline runs there ({exc})") from None
    ledger_path = folder / "wandb" / LEDGER
    try:
        ledger: dict[str, str] = json.loads(ledger_path.read_text()) if ledger_path.is_file() else {}
    except (OSError, ValueError) as exc:
        raise TrackerUnavailable(f"{ledger_path}: unreadable ({exc}); remove it to export every run again") from None
    done = Exported()
    # staged artefact copies stay beside the runs; W&B's progress lines would drown the summary
    with environ(WANDB_DATA_DIR=str(folder / "wandb" / ".data"), WANDB_SILENT="true"):
        for tracked in runs:
            digest = tracked.digest
            if ledger.get(tracked.key) == digest:
                done.unchanged += 1
                continue
            _write(wandb, tracked, project, folder)
            if tracked.key in ledger:
                done.updated += 1
            else:
                done.created += 1
            ledger[tracked.key] = digest
            atomic_write_json(ledger_path, ledger)  # after each run: an interrupted export resumes where it stopped
    return done

