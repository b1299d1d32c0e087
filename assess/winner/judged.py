"""The winner file written where a verdict is reached: a sweep's fastest cell at parity (`assess report`, beside its
index.html) and a climb's final incumbent (the experiment's folder, beside final-result.json). Both build the same
record (assess.winner.contract.Winner) from the judged runs, and check that its overrides compose back to the judged
cell before writing it (render.cell.cell_overrides)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from assess.winner.contract import LIBRARIES, Evidence, Winner, judged_samples


def python_snippet(winner_path: Path | str, model: str = "<your model folder or hub id>") -> str:
    """The copy-paste Python that takes this winner to a pipeline of one's own (README: Take the winner to production)."""
    return (f"import hypergrid\n"
            f"pipe = ...  # your pipeline, loaded your way from {model}\n"
            f"applied = hypergrid.apply(pipe, \"{winner_path}\")  # the winner file beside this report\n"
            "image = pipe(**applied.call_kwargs(\"a red circle\", seed=0)).images[0]")


def winner_of(runs: Sequence[Any], cell_key: str, evidence: Evidence, source: dict[str, Any]) -> Winner:
    """The winner record of `cell_key` from its judged runs (render.rundir.RunDir, the cell's and others')."""
    from render.cell import cell_overrides

    own = [r for r in runs if r.cell_key == cell_key]
    if not own:
        raise ValueError(f"no run of cell {cell_key[:12]} among the judged runs")
    first = own[0]
    cell = dict(first.cell)
    recorded = first.run.versions
    return Winner(model=dict(cell["model"]), cell_key=cell_key, cell=cell, device_kind=str(cell["device_kind"]),
                  overrides=cell_overrides(cell),
                  anchor={"cell_key": first.anchor_cell_key, "overrides": list(first.anchor_overrides)},
                  evidence=evidence, samples=judged_samples(list(own), cell_key),
                  versions={name: recorded.get(name) for name in LIBRARIES if name in recorded}, source=source)


def checked(winner: Winner) -> Winner:
    """The winner, once its overrides compose back to its cell (the device kind aside); ValueError otherwise."""
    from assess.winner.apply import check_recorded, compose_job

    device = "cpu" if winner.device_kind == "cpu" else "auto"
    check_recorded(compose_job(winner.overrides, device).cell, winner.cell)
    return winner


def sweep_winner(table: dict[str, Any], best: dict[str, Any], runs: Sequence[dict[str, Any]], sweeps: Sequence[Path],
                 alpha: float, floor: Any = None) -> Winner:
    """The winner of a sweep's verdict table: `best`, its row the answer names (assess.verdicts.answer.fastest_at_parity)."""
    from render.rundir import load_run

    judged = [load_run(r["path"]) for r in runs if r["cell_key"] in (best["cell_key"], best["anchor_cell_key"])]
    split = next((str(r["split"]) for r in runs if r["cell_key"] == best["cell_key"]), "dev")
    evidence = Evidence(
        verdict=str(best["verdict"]), metric=table["metrics"][0], band=table.get("band"),
        band_source=str(table.get("band_source") or ""), alpha=alpha,
        speedup=_interval(best.get("speed_value"), best.get("speed_low"), best.get("speed_high"), best.get("speed_n")),
        timed=str(best.get("timed", "")),
        quality=_interval(best.get("quality_value"), best.get("quality_low"), best.get("quality_high"),
                          best.get("n_prompts")),
        prompts=int(best.get("n_prompts") or 0), split=split,
        floor=floor.as_dict() if floor is not None else None)
    return checked(winner_of(judged, best["cell_key"], evidence, {"kind": "sweep", "sweeps": [str(s) for s in sweeps]}))


def final_winner(result: Any, exp: Any) -> Winner | None:
    """The winner of a climb's final (assess.climb.run_final.FinalResult): its incumbent, judged on the holdout; None
    when the incumbent was not rendered there."""
    from render.rundir import load_runs

    arm = result.arm("incumbent")
    if arm.cell_key is None or not result.sweeps:
        return None
    runs = load_runs([Path(s) for s in result.sweeps], with_anchors=True)
    q = arm.quality or {}
    speed = arm.speedup or {}
    evidence = Evidence(
        verdict=str(result.parity), metric=result.metric, band=result.band,
        band_source=f"experiment {result.experiment}'s rule in force at the final's claim", alpha=result.alpha,
        speedup=_interval(speed.get("value"), speed.get("low"), speed.get("high"), speed.get("n")),
        timed=str(arm.timed or "timed apart"),
        quality=_interval(q.get("mean"), q.get("low"), q.get("high"), q.get("n")),
        prompts=int(q.get("n") or 0), split=exp.holdout.split,
        holdout={"verdict": result.parity, "claimed_at": result.claimed_at, "vs_control": result.vs_control or None,
                 "reuse": result.reuse})
    winner = winner_of(runs, arm.cell_key, evidence,
                       {"kind": "final", "experiment": result.experiment, "sweeps": list(result.sweeps)})
    # what `verify` renders again: the incumbent's dev samples, never the holdout's (the holdout is seen once, by the
    # final; render.laws.holdout); the holdout's verdict stays the evidence
    dev = [r for r in load_runs(exp.ledger.out_roots(), problems=[])
           if r.cell_key == arm.cell_key and r.split == exp.dev.split]
    return checked(replace(winner, samples=judged_samples(dev, arm.cell_key)))


def _interval(value: Any, low: Any, high: Any, n: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    return {"value": float(value), "low": None if low is None else float(low),
            "high": None if high is None else float(high), "n": None if n is None else int(n)}


