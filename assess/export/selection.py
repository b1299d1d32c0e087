"""What an export sends, whatever the tracker: a list of `TrackedRun`s built from the index through the report's
and the climb's own code (assess.report.write, assess.statistics.compare, assess.climb), never recomputed here.

A sweep is one parent run (kind `sweep`: the report folder as its artefact) and one nested run per cell (kind
`cell`: overrides as parameters, the report's numbers with their intervals as metrics, the cell's contact sheet
against its anchor as its artefact). An experiment is one parent run (kind `experiment`: its configuration,
budget and final, the experiment report) and one nested run per generation (kind `generation`: the decision and
the incumbent's evaluation, the generation's record). Each run's `key` is its identity in the tracker: the same
scope, cell key, split and metric versions give the same key, so a second export updates the run it made.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assess.metrics import SPECS
from assess.statistics.side_by_side import SIDE_BY_SIDE
from render.rundir.redact import redact, redact_data

# The tags every tracked run carries (MLflow tags; W&B config keys under `hypergrid`).
KEY_TAG = "hypergrid.key"
KIND_TAG = "hypergrid.kind"


@dataclass
class TrackedRun:
    key: str  # identity in the tracker (see the module docstring)
    name: str  # display name
    kind: str  # sweep | cell | experiment | generation
    parent: str | None  # key of the parent run, None for a parent
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    artefacts: list[tuple[Path, str]] = field(default_factory=list)  # (local file or folder, folder in the run)
    timestamp_ms: int = 0  # when its numbers were made (fixed per content, so a re-export logs nothing new)

    def __post_init__(self) -> None:
        """What a tracker is sent has its credentials redacted (render.rundir.redact): name, parameters, tags."""
        self.name = redact(self.name)
        self.params, self.tags = redact_data(self.params), redact_data(self.tags)

    @property
    def digest(self) -> str:
        """A fingerprint of what the run holds: unchanged content needs no new write (W&B offline)."""
        content = {"params": self.params, "tags": self.tags, "metrics": self.metrics, "name": self.name,
                   "artefacts": [(_tree_digest(p), a) for p, a in self.artefacts]}
        return _hash(content)


@dataclass
class Exported:
    created: int = 0
    updated: int = 0
    unchanged: int = 0

    def line(self, where: str) -> str:
        return f"{where}: {self.created} run(s) created, {self.updated} updated, {self.unchanged} unchanged"


def _hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _tree_digest(path: Path) -> str:
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    h = hashlib.sha256()
    for f in files:
        if f.suffix == ".html":  # the report stamps its generation time: compare it without that line
            text = "\n".join(line for line in f.read_text(encoding="utf-8").splitlines() if "generated" not in line.lower())
            h.update(text.encode())
        else:
            h.update(f.read_bytes())
    return h.hexdigest()


def _ms(stamp: str | None) -> int:
    from render.rundir import parse_time

    when = parse_time(stamp)
    return int(when.timestamp() * 1000) if when else 0


def _estimate(metrics: dict[str, float], name: str, estimate: Any) -> None:
    """name, name/low, name/high (and name/p) of an assess.statistics.compare.Estimate, where it has them."""
    metrics[name] = estimate.value
    for suffix, value in (("low", estimate.low), ("high", estimate.high), ("p", estimate.p_value)):
        if value is not None:
            metrics[f"{name}/{suffix}"] = value
    metrics[f"{name}/n"] = float(estimate.n)


# -- a sweep ----------------------------------------------------------------------------------


def cell_metrics(view: Any) -> dict[str, float]:
    """The report's numbers of one cell (assess.report.write.CellView): values over the sweep's samples, the
    comparison with the anchor (a reference metric's mean, or a delta, each with its 95 % interval), speed-up."""
    metrics: dict[str, float] = {"samples": float(view.n_samples), "samples/expected": float(view.n_expected)}
    for name, value in view.values.items():
        if value is not None:
            metrics[name] = float(value)
    comparison = view.comparison
    if comparison is not None:
        for name, estimate in comparison.metrics.items():
            kind = comparison.kinds.get(name, "mean")
            _estimate(metrics, f"{name}/{kind}", estimate)
        if comparison.speedup is not None:  # side by side when timed so, else timed apart (the tag says which)
            _estimate(metrics, "speedup", comparison.speedup)
            metrics["speedup/side_by_side"] = 1.0 if comparison.timed == SIDE_BY_SIDE else 0.0
        if comparison.render_speedup is not None:
            _estimate(metrics, "speedup/render_time", comparison.render_speedup)
    metrics["speed_noisy"] = 1.0 if view.noisy else 0.0  # flagged too noisy to rank (assess.statistics.noise; the reason: a tag)
    return metrics


def metric_versions(names: list[str]) -> dict[str, int]:
    return {n: SPECS[n].version for n in sorted(set(names)) if n in SPECS}


def param_name(key: str) -> str:
    """An override key as a parameter name both trackers accept (letters, digits, _ - . / and spaces)."""
    return re.sub(r"[^\w\-. /]", "_", key)


def _verdict_tags(recorded: dict[str, Any] | None) -> dict[str, str]:
    """A cell's recorded verdict (its experiment's frozen rule, assess.verdicts.recorded): the one verdict a tracker shows."""
    if recorded is None:
        return {}
    from assess.verdicts.recorded import recorded_text

    return {"hypergrid.verdict": str(recorded["verdict"]), "hypergrid.verdict_source": recorded_text(recorded)}


def _cell_run(view: Any, scope: str, parent: str, runs: list[dict[str, Any]], sheet: Path | None,
              recorded: dict[str, Any] | None = None) -> TrackedRun:
    metrics = cell_metrics(view)
    versions = metric_versions(list(view.values))
    params = {**{param_name(k): str(v) for k, v in view.axes.items()}, "cell_key": view.cell_key, "split": view.split,
              "anchor_cell_key": view.anchor_cell_key,
              **{f"metric_version/{n}": str(v) for n, v in versions.items()}}
    tags = {KIND_TAG: "cell", "hypergrid.cell_key": view.cell_key, "hypergrid.scope": scope,
            **({"hypergrid.noisy": view.noisy} if view.noisy else {}),
            **({"hypergrid.speedup_timed": view.comparison.speedup.note or ""}
               if view.comparison and view.comparison.speedup else {}),
            "hypergrid.status": view.status, "hypergrid.is_anchor": str(view.is_anchor).lower(),
            "hypergrid.command": view.command, "hypergrid.label": view.label,
            **_verdict_tags(recorded if recorded and recorded.get("split") == view.split else None)}
    mine = [r for r in runs if r["cell_key"] == view.cell_key and r["split"] == view.split]
    stamp = max((r["finished_at"] or r["started_at"] or "" for r in mine), default="")
    return TrackedRun(key=_hash(["cell", scope, view.cell_key, view.split, versions]), name=view.label,
                      kind="cell", parent=parent, params=params, tags=tags, metrics=metrics,
                      artefacts=[(sheet, "contact_sheet")] if sheet else [], timestamp_ms=_ms(stamp))


def sweep_runs(sweep: Path, db: Path | None, work: Path) -> list[TrackedRun]:
    """The sweep's parent run and its cells' runs; the report and the contact sheets are written under `work`."""
    from assess.index.database import Index
    from assess.report.write import sweep_cells, write_report
    from assess.verdicts.recorded import recorded_verdicts

    sweep = sweep.resolve()
    scope = str(sweep)
    report = write_report([sweep], db, out=work / "report").parent
    parent = _hash(["sweep", scope])
    with Index.open(db, create=False) as index:
        views, rows = sweep_cells(index, [sweep])
        recorded = recorded_verdicts([r["path"] for r in rows])
        anchors = {(v.cell_key, v.split): v for v in views if v.is_anchor}
        cells = []
        for view in views:
            anchor = anchors.get((view.anchor_cell_key, view.split))
            columns = [view] if view.is_anchor or anchor is None else [anchor, view]
            sheet = contact_sheet_png(index, columns, work / "sheets" / view.cell_key)
            cells.append(_cell_run(view, scope, parent, rows, sheet, recorded.get(view.cell_key)))
    statuses = [r["status"] for r in rows]
    metrics = {"cells": float(len(views)), "runs/done": float(statuses.count("done")),
               "runs/failed": float(statuses.count("failed")), "runs/incomplete": float(statuses.count("incomplete")),
               "samples": float(sum(v.n_samples for v in views)),
               "samples/expected": float(sum(v.n_expected for v in views)),
               "gpu_s": float(sum(r["gpu_s"] for r in rows))}
    stamp = max((c.timestamp_ms for c in cells), default=0)
    head = TrackedRun(key=parent, name=sweep.name, kind="sweep", parent=None,
                      params={"sweep": scope, "cells": str(len(views))},
                      tags={KIND_TAG: "sweep", "hypergrid.scope": scope}, metrics=metrics,
                      artefacts=[(report, "report")], timestamp_ms=stamp)
    return [head, *cells]


def contact_sheet_png(index: Any, columns: list[Any], out: Path) -> Path | None:
    """The report's contact sheet of these cells (anchor first) as one PNG: a row per prompt, a column per cell."""
    from PIL import Image

    from assess.report.write import cell_sheet

    sheet = cell_sheet(index, columns, out)
    paths = [[out / img["src"] if img["src"] else None for img in row["images"]] for row in sheet.rows]
    opened = [[Image.open(p).convert("RGB") if p else None for p in row] for row in paths]
    sizes = [im.size for row in opened for im in row if im is not None]
    if not sizes:
        return None
    w, h = max(s[0] for s in sizes), max(s[1] for s in sizes)
    canvas = Image.new("RGB", (w * len(columns), h * len(opened)), "white")
    for y, row in enumerate(opened):
        for x, im in enumerate(row):
            if im is not None:
                canvas.paste(im, (x * w, y * h))
    path = out / "contact_sheet.png"
    canvas.save(path)
    return path


# -- an experiment (the climb) --------------------------------------------------------------------


def _evaluation(metrics: dict[str, float], prefix: str, e: dict[str, Any]) -> None:
    from assess.climb.archive import objective_value

    for name in ("delta", "low", "high", "tost_p", "wilcoxon_holm", "rung", "n"):
        if e.get(name) is not None:
            metrics[f"{prefix}/{name}"] = float(e[name])
    if (value := objective_value(e)) is not None:  # s/image or GPU-s/image: the generation's rule.objective
        metrics[f"{prefix}/objective_value"] = value


def _generation_run(g: dict[str, Any], name: str, parent: str, version: int) -> TrackedRun:
    inc = g["incumbent"]
    metrics: dict[str, float] = {"cells": float(len(g.get("cells", []))),
                                 "proposals": float(len(g.get("proposals", [])))}
    _evaluation(metrics, "incumbent", inc)
    for field_name in ("spent_s", "limit_s", "reserve_s", "left_s", "est_s", "final_s"):
        value = (g.get("budget") or {}).get(field_name)
        if value is not None:
            metrics[f"budget/{field_name}"] = float(value)
    params = {"generation": str(g["generation"]), "incumbent": " ".join(inc.get("overrides") or []),
              "incumbent_status": inc["status"], "incumbent_cell_key": str(inc.get("cell_key") or ""),
              "objective": str((g.get("rule") or {}).get("objective") or "")}  # empty: recorded before it was named
    tags = {KIND_TAG: "generation", "hypergrid.experiment": name, "hypergrid.note": g["note"],
            "hypergrid.stop": g.get("stop") or "", "hypergrid.incumbent_verdict": str(inc.get("verdict") or ""),
            "hypergrid.commands": "\n".join(g.get("commands", []))}
    return TrackedRun(key=_hash(["generation", name, g["generation"], version]), name=f"{name} g{g['generation']:04d}",
                      kind="generation", parent=parent, params=params, tags=tags, metrics=metrics,
                      artefacts=[(Path(g["record"]), "generation")], timestamp_ms=_ms(g.get("created_at")))


def _final_metrics(result: Any) -> dict[str, float]:
    """final/<role>/speedup and final/<role>/quality (the delta to the anchor on the holdout), with intervals."""
    metrics: dict[str, float] = {}
    for arm in result.arms:
        if arm.timed:  # how the headline speed-up was timed: 1 side by side, 0 timed apart
            metrics[f"final/{arm.role}/speedup/side_by_side"] = 1.0 if arm.timed == SIDE_BY_SIDE else 0.0
        for name, figure in (("speedup", arm.speedup or {}), ("speedup/render_time", arm.render_speedup or {}),
                             ("quality", arm.quality or {})):
            value = figure.get("value", figure.get("mean"))
            if value is None:
                continue
            metrics[f"final/{arm.role}/{name}"] = float(value)
            for part in ("low", "high", "tost_p", "n"):
                if figure.get(part) is not None:
                    metrics[f"final/{arm.role}/{name}/{part}"] = float(figure[part])
    return metrics


def experiment_runs(name: str, db: Path | None, out_root: Path | None, work: Path) -> list[TrackedRun]:
    """The experiment's parent run and one nested run per generation, from its records and the index."""
    from assess.climb.generation import budget_state, final_claimed
    from assess.climb.archive import read_generations
    from assess.climb.experiment_report import recorded_final, write_experiment_report
    from assess.experiment import load_experiment
    from assess.index.database import Index

    exp = load_experiment(name, (), out_root)
    report = write_experiment_report(name, db, out_root=out_root, out=work / "report").parent
    generations = read_generations(exp.out_root, name)
    final = final_claimed(exp)
    version = SPECS[exp.quality.metric].version
    parent = _hash(["experiment", name, str(exp.out_root.resolve())])
    budget = budget_state(exp)
    metrics = {"generations": float(len(generations)), "budget/spent_s": budget.spent_s,
               "budget/limit_s": budget.limit_s, "budget/reserve_s": budget.reserve_s}
    tags = {KIND_TAG: "experiment", "hypergrid.experiment": name, "hypergrid.out_root": str(exp.out_root),
            "hypergrid.stop": (generations[-1].get("stop") or "") if generations else ""}
    result = None
    if final:
        with Index.open(db, create=False) as index:
            result = recorded_final(exp, index, final)  # the ledger's recorded result, once the final completed
    if result is not None:
        metrics |= _final_metrics(result)
        tags |= {"hypergrid.final.incumbent": result.incumbent_line, "hypergrid.final.parity": str(result.parity)}
    params = {"model": exp.model, "quality.metric": exp.quality.metric, "quality.band": str(exp.quality.band),
              "quality.alpha": str(exp.quality.alpha), f"metric_version/{exp.quality.metric}": str(version),
              "rungs": ",".join(map(str, exp.rungs)), "eta": str(exp.eta), "dev": exp.dev.option,
              "holdout": exp.holdout.option, "budget.limit_s": str(budget.limit_s),
              "budget.reserve_s": str(budget.reserve_s),
              **{f"axis/{a}": ",".join(v) for a, v in exp.axes.items()}}
    nested = [_generation_run(g, name, parent, version) for g in generations]
    stamp = max([n.timestamp_ms for n in nested] + [_ms((final or {}).get("claimed_at"))])
    head = TrackedRun(key=parent, name=f"experiment {name}", kind="experiment", parent=None, params=params, tags=tags,
                      metrics=metrics, artefacts=[(report, "report")], timestamp_ms=stamp)
    return [head, *nested]
