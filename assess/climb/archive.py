"""Generations on disk (the source of truth) and their mirror in the index.

Each decided generation is one JSON file, `<out_root>/experiments/<name>/generations/g0001.json`,
created exclusively (a concurrent climb that decided the same generation gets an error, not a
duplicate). The index's `generations` and `generation_cells` tables are rebuilt from these files whenever the climb or
the report reads them; its `finals` table keeps a claim even when the ledger copies are gone (evidence of a
spent holdout, render.laws).
"""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Sequence
from typing import Any

from assess.errors import AssessError
from assess.index.database import Index, json_dumps
from render.rundir import create_json

GENERATIONS = "generations"


def experiment_dir(out_root: Path, name: str) -> Path:
    from render.laws import experiment_dir as render_experiment_dir

    return render_experiment_dir(out_root, name)


def generation_path(out_root: Path, name: str, number: int) -> Path:
    return experiment_dir(out_root, name) / GENERATIONS / f"g{number:04d}.json"


def objective_value(evaluation: dict[str, Any]) -> float | None:
    """A recorded evaluation's median warm figure in the objective's units (the rule's `objective`: s/image or
    GPU-s/image); records written before it had its name keep it as `latency`, whatever the objective."""
    value = evaluation.get("objective_value", evaluation.get("latency"))
    return None if value is None else float(value)


def read_generations(out_root: Path, name: str) -> list[dict[str, Any]]:
    """Every recorded generation, in order; a gap or an unreadable file raises."""
    folder = experiment_dir(out_root, name) / GENERATIONS
    records = []
    for number, path in enumerate(sorted(folder.glob("g[0-9][0-9][0-9][0-9].json")), start=1):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise AssessError(f"{path}: unreadable generation record ({exc}); restore it or remove it and "
                              "the ones after it") from None
        if record.get("generation") != number:
            raise AssessError(f"{path}: expected generation {number}, found {record.get('generation')}; "
                              f"the records in {folder} must be numbered without gaps")
        records.append({**record, "record": str(path)})
    return records


def write_generation(out_root: Path, name: str, record: dict[str, Any]) -> Path:
    """Create the generation's file exclusively and atomically (render.rundir.create_json)."""
    path = generation_path(out_root, name, record["generation"])
    try:
        create_json(path, record)
    except FileExistsError:
        raise AssessError(f"generation {record['generation']} of experiment {name} was recorded meanwhile by "
                          f"another climb ({path}); run the climb again") from None
    return path


def sync_index(index: Index, name: str, generations: list[dict[str, Any]], final: dict[str, Any] | None,
               final_path: Path | None, holdout: Sequence[str] = ()) -> None:
    """Make the index's climb tables equal to the files; a final is kept with its holdout's text identities
    (`holdout`: render.rundir.holdout_identity of each), so another name's final on them is found by content."""
    with index.write():
        index.table("generations").delete_where("experiment = ?", (name,))
        index.table("generation_cells").delete_where("experiment = ?", (name,))
        index.table("generations").insert_all([{
            "experiment": name, "number": g["generation"], "created_at": g["created_at"], "state": g["state"],
            "incumbent": json_dumps(g["incumbent"]["cell"]), "incumbent_status": g["incumbent"]["status"],
            "stop": g.get("stop"), "note": g["note"], "commands": json_dumps(g.get("commands", [])),
            "record": g["record"]} for g in generations], alter=False)
        index.table("generation_cells").insert_all([{
            "experiment": name, "number": g["generation"], "cell": json_dumps(p["cell"]), "rung": p["rung"],
            "kind": p["kind"], "reason": p["reason"], "est_s": p.get("est_s")}
            for g in generations for p in g.get("proposals", [])], replace=True, alter=False)
        if final is not None:  # a claim stays in the index for good: deleting a ledger copy does not reset it
            index.table("finals").insert({
                "experiment": name, "claimed_at": final.get("claimed_at") or final.get("at", ""),
                "incumbent": json_dumps(final.get("incumbent", {}).get("cell", {})), "record": str(final_path),
                "holdout": json_dumps(sorted(holdout))},
                replace=True, alter=False)
