"""`assess report <experiment>`: the whole climb in one offline HTML folder.

<out_root>/experiments/<name>/report/: index.html (the final on the holdout: the winning cell and
its runnable override line, its speed-up and quality delta with intervals next to the anchor and
the steps-only control; the dev cells as the climb sees them now; every generation with its
decision and commands; the budget) and frontier.png (dev latency vs quality delta, the parity
band, the frontier and the incumbent).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from assess.statistics import speed_axis
from assess.climb.decide import Decision
from assess.climb.run_final import Arm, FinalResult, final_result
from assess.climb.generation import budget_state, final_claimed, replay
from assess.climb.observe import Observed, observe, sync_run_experiments
from assess.climb.archive import experiment_dir, sync_index
from assess.climb.printout import amendment_lines, budget_line, num, signed
from assess.experiment import Experiment, load_experiment
from assess.index.database import Index
from assess.report.outdir import staged
from assess.report.write import place_labels
from assess.statistics.compare import Verdict, parity_text
from assess.statistics.side_by_side import TIMED_APART
from assess.verdicts.answer import Answer, Final, climb_sentence, final_sentence
from assess.verdicts.table import experiment_verdict
from render.rundir.redact import finalize

VERDICT_COLOURS = {Verdict.PARITY: "tab:green", Verdict.UNDECIDED: "tab:orange", Verdict.OUT: "tab:red", Verdict.NO_DATA: "tab:gray"}


def frontier_plot(exp: Experiment, decision: Decision, anchor_latency: float | None, path: Path,
                  marks: dict[Any, str] | None = None) -> str | None:
    """Dev latency vs quality delta; returns why it could not be drawn, or None."""
    fig = frontier_figure(exp, decision, anchor_latency, marks)
    if isinstance(fig, str):
        return fig
    fig.savefig(path)
    return None


def frontier_figure(exp: Experiment, decision: Decision, anchor_latency: float | None,
                    marks: dict[Any, str] | None = None) -> Any:
    """The frontier plot (a matplotlib Figure), or why it cannot be drawn: each cell a point with its quality
    interval, labelled by its row in the verdict table (`marks`: cell -> its row's number; table_marks), no label
    over another."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    points = [(c, e, e.latency, e.mean) for c, e in decision.current.items() if e.latency is not None and e.mean is not None]
    if not points:
        return "no cell has both a warm latency and a quality delta yet"
    fig = Figure(figsize=(8, 5.5), dpi=100)
    ax = fig.subplots()
    band = exp.quality.band
    ys = [y for *_, y in points]
    if exp.quality.test == "equivalence":
        ax.axhspan(-band, band, color="tab:green", alpha=0.08, label=f"parity band ±{band:g}")
    elif exp.quality.direction == "higher":  # non-inferiority: no worse than -band, however much better
        ax.axhspan(-band, max(band, max(ys) + band), color="tab:green", alpha=0.08, label=f"no worse than -{band:g}")
    else:
        ax.axhspan(min(-band, min(ys) - band), band, color="tab:green", alpha=0.08, label=f"no worse than +{band:g}")
    for verdict, colour in VERDICT_COLOURS.items():
        chosen = [(x, y) for _, e, x, y in points if e.verdict == verdict]
        if chosen:
            ax.scatter([x for x, _ in chosen], [y for _, y in chosen], c=colour, s=40, zorder=3, label=verdict)
    for _, e, x, y in points:  # the quality delta's interval
        if e.low is not None and e.high is not None:
            ax.errorbar([x], [y], yerr=[[max(0.0, y - e.low)], [max(0.0, e.high - y)]], fmt="none", ecolor="gray",
                        alpha=0.6, elinewidth=1, capsize=2, zorder=2)
    on_front = [decision.current[c] for c in decision.frontier]  # each has a latency and a mean (decide.frontier)
    front = [(e.latency, e.mean) for e in on_front if e.latency is not None and e.mean is not None]
    if front:
        ax.step([x for x, _ in front], [y for _, y in front], where="post", color="tab:blue", lw=1.2,
                label="frontier", zorder=2)
    inc = decision.current.get(decision.incumbent)
    if inc is not None and inc.latency is not None and inc.mean is not None:
        ax.scatter([inc.latency], [inc.mean], s=260, facecolors="none", edgecolors="black", lw=1.5, zorder=4,
                   label=f"incumbent ({decision.incumbent_status})")
    if anchor_latency is not None:
        ax.scatter([anchor_latency], [0.0], marker="*", s=220, c="tab:red", zorder=4, label="anchor")
    ax.set_xlabel(f"{speed_axis.label(exp.objective)}, on {exp.dev.option}")
    ax.set_ylabel(f"{exp.quality.metric} delta to the anchor ({exp.quality.direction} is better)")
    ax.set_title(f"experiment {exp.name}: speed vs quality on {exp.dev.option}")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=7)
    fig.tight_layout()
    FigureCanvasAgg(fig)
    marks = marks or frontier_marks(exp, decision)
    place_labels(ax, [(marks[c], x, y) for c, _, x, y in points])  # short marks, none overlapping another
    return fig


def table_marks(verdict: dict[str, Any]) -> dict[Any, str]:
    """Each climb cell's row number in the experiment's verdict table (assess.verdicts.table.experiment_verdict)."""
    return {r["coords"]: r["mark"].lstrip("*") for r in verdict["rows"] if "coords" in r}


def frontier_marks(exp: Experiment, decision: Decision) -> dict[Any, str]:
    """The plot's short name of each cell without a verdict table: a number by latency, fastest first."""
    ordered = sorted(decision.current.items(), key=lambda ce: (ce[1].latency is None, ce[1].latency or 0.0))
    return {c: str(i + 1) for i, (c, _) in enumerate(ordered)}


def _current_decision(index: Index, exp: Experiment) -> tuple[Observed, Decision, list[dict[str, Any]]]:
    sync_run_experiments(index)
    observed = observe(index, exp)
    again = replay(exp, observed)  # the climb's own replay, its cost estimator included
    return observed, again.decision, again.history


def _cell_rows(exp: Experiment, decision: Decision, observed: Observed, marks: dict[Any, str]) -> list[dict[str, Any]]:
    """The dev cells in the verdict table's order (`marks`: side by side first), their render-time speed-ups."""
    import statistics

    rows = []
    for c, e in sorted(decision.current.items(), key=lambda ce: int(marks.get(ce[0], "0"))):
        anchor = [x for p in exp.dev.ids[:e.rung] for x in observed.anchor_latencies.get(p, ())]
        speed = statistics.median(anchor) / e.latency if anchor and e.latency else None
        rows.append({"label": exp.label(c), "incumbent": c == decision.incumbent, "frontier": c in decision.frontier,
                     "rung": e.rung, "n": e.n, "delta": signed(e.mean), "ci": f"[{signed(e.low)}, {signed(e.high)}]",
                     "wilcoxon": num(e.wilcoxon_holm, 2), "tost": num(e.tost_p, 2), "verdict": e.verdict,
                     "latency": num(e.latency), "speedup": f"{speed:.2f}x" if speed else "n/a",
                     "cell_key": observed.keys.get(c, "")})
    return rows


def _final_context(result: FinalResult | None, model: str) -> dict[str, Any] | None:
    if result is None:
        return None
    from assess.climb.run_final import _interval, speed_text

    arms = []
    for arm in result.arms:
        q = arm.quality or {}
        arms.append({"role": arm.role, "overrides": " ".join(arm.overrides), "cell_key": arm.cell_key or "",
                     "delta": _interval({"value": q.get("mean"), "low": q.get("low"), "high": q.get("high")}),
                     "verdict": q.get("verdict", "n/a"), "n": q.get("n", 0),
                     "speedup": speed_text(arm.speedup) if arm.speedup else
                     ("1x (reference)" if arm.role == "anchor" else "n/a"),
                     "timed": arm.timed or "", "how": (arm.speedup or {}).get("note") or "",
                     "render_speedup": speed_text(arm.render_speedup) if arm.render_speedup else "",
                     "note": arm.note or ""})
    vs = result.vs_control or {}
    return {**asdict(result), "arms": arms,
            "vs_speedup": speed_text(vs.get("speedup")),
            "vs_quality": _interval(vs.get("quality_diff")) if vs.get("quality_diff") else "n/a",
            "run_line": winner_line(result, model)}


def winner_line(result: FinalResult, model: str) -> str:
    """The command that renders the final's winner."""
    return f"python -m render model={model} {result.incumbent_line}"


def final_answer(result: FinalResult, model: str) -> Answer:
    """The answer a report of a climb with a final opens with (assess.verdicts.answer.final_sentence)."""
    from assess.climb.run_final import speed_text

    arms = {a.role: a for a in result.arms}  # a recorded final holds its arms as they were rendered
    incumbent = arms.get("incumbent") or Arm("incumbent", [], None)
    control = arms.get("control") or Arm("control", [], None, note="not rendered on the holdout")
    vs = result.vs_control or {}
    over_control = {"speedup": speed_text(vs["speedup"]), "timed": vs.get("timed") or TIMED_APART} \
        if vs.get("speedup") else None
    return final_sentence(Final(
        result.experiment, result.incumbent_line, result.parity, result.metric, result.band,
        int((incumbent.quality or {}).get("n") or 0),
        {"speedup": speed_text(incumbent.speedup), "timed": incumbent.timed or ("" if incumbent.speedup else
                                                                                "no warm latency")},
        over_control, control.note or "", winner_line(result, model)))


def experiment_answer(exp: Experiment, result: FinalResult | None, decision: Decision,
                      verdict: dict[str, Any]) -> Answer:
    """The one sentence an experiment report opens with: the final's, or before it where the climb stands."""
    if result is not None:
        return final_answer(result, exp.model)
    incumbent = next((r for r in verdict["rows"] if r.get("coords") == decision.incumbent), None)
    return climb_sentence(exp.name, incumbent, str(decision.incumbent_status), decision.generation, decision.stop,
                          decision.note)


def recorded_final(exp: Any, index: Index, final: dict[str, Any] | None) -> FinalResult | None:
    """The final's verdict as recorded when it completed (under the rule in force at its claim); computed under that
    rule from the index while it has not completed."""
    from render.laws import final_result as recorded

    done = recorded(exp.ledger)
    if done is not None:
        return FinalResult.from_dict(done)
    return final_result(index, exp, final) if final else None


def set_apart(exp: Experiment, observed: Observed) -> list[str]:
    """The evidence the climb did not decide on, and why: runs kept apart or adopted (another ledger, another anchor),
    and scores set apart by the rule (another metric model than the frozen rule's)."""
    lines = list(observed.ignored)
    for coords, cell in sorted(observed.cells.items(), key=lambda item: exp.label(item[0])):
        apart = [why for why in cell.unavailable.values() if why.startswith("set apart")]
        if apart:
            lines.append(f"{exp.label(coords)}: {len(apart)} prompt(s)' {exp.quality.metric} scores {apart[0]}")
    return lines


def write_experiment_report(name: str, db: Path | None = None, out_root: Path | None = None,
                            overrides: tuple[str, ...] = (), out: Path | None = None,
                            what_if_band: float | None = None) -> Path:
    """Write the experiment's report folder and return the path of its index.html. The verdicts are the rule in
    force's; `what_if_band` (a --band on the command line) adds each cell's verdict under it, labelled what if."""
    exp = load_experiment(name, overrides, out_root, strict=False)  # a changed config is shown, not a reason to hide
    out_dir = Path(out).resolve() if out else experiment_dir(exp.out_root, name).resolve() / "report"
    with staged(out_dir) as staging:  # a new folder or one of its own reports, replaced whole (assess.report.outdir)
        _experiment_page(name, exp, db, staging, what_if_band)
    return out_dir / "index.html"


def _experiment_page(name: str, exp: Any, db: Path | None, staging: Path, what_if_band: float | None = None) -> None:
    from jinja2 import Environment, PackageLoader, select_autoescape

    from render.rundir import holdout_identity

    final = final_claimed(exp)
    with Index.open(db, create=False) as index:
        observed, decision, history = _current_decision(index, exp)
        sync_index(index, name, history, final, exp.ledger.state_copy, [holdout_identity(t) for t in exp.holdout.texts])
        result = recorded_final(exp, index, final)
        verdict = experiment_verdict(index, exp, decision, observed, what_if_band)
        index_path = str(Path(index.path).resolve())
    import statistics

    anchor = [x for v in observed.anchor_latencies.values() for x in v]
    verdict["answer"] = experiment_answer(exp, result, decision, verdict)
    problem = frontier_plot(exp, decision, statistics.median(anchor) if anchor else None, staging / "frontier.png",
                            table_marks(verdict))
    context = {
        "title": f"hypergrid experiment {name}",
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "index_path": index_path,
        "exp": exp,
        "axes": {a: ", ".join(v) for a, v in exp.axes.items()},
        "budget": budget_line(budget_state(exp, observed)),
        "strangers": [f"{r.path}: {r.why}" for r in observed.strangers],
        "set_apart": set_apart(exp, observed),
        "rule_problem": exp.rule_problem,
        "amendments": amendment_lines(exp),
        "final": _final_context(result, exp.model),
        "decision": decision,
        "incumbent": exp.label(decision.incumbent),
        "cells": _cell_rows(exp, decision, observed, table_marks(verdict)),
        "generations": history,
        "frontier": None if problem else "frontier.png",
        "frontier_problem": problem,
        "to_score": [str(p) for p in observed.to_score],
        "holdout_runs": observed.holdout_runs if final is None else [],
        "verdict": verdict,
        "parity_rule": parity_text(exp.quality.test, exp.quality.band, exp.quality.alpha),
    }
    env = Environment(loader=PackageLoader("assess", "templates"), autoescape=select_autoescape(["html", "j2"]),
                      finalize=finalize)  # every printed value escaped, and its credentials redacted
    (staging / "index.html").write_text(env.get_template("experiment.html.j2").render(**context), encoding="utf-8")
