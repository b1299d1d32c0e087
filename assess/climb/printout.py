"""What `assess climb` prints: the decision with its reasons, the table behind it, the next command."""

from __future__ import annotations

import os
import statistics
from typing import TYPE_CHECKING, Any

from assess.statistics.compare import parity_text

if TYPE_CHECKING:
    from assess.climb.decide import BudgetState
    from assess.climb.generation import Step


def num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"


def signed(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.4f}"


def budget_line(budget: BudgetState) -> str:
    h = 3600.0
    money = ""
    if budget.price_per_gpu_hour:
        price = budget.price_per_gpu_hour
        money = f" (${budget.spent_s / h * price:.2f} of ${budget.limit_s / h * price:.2f})"
    final = "" if budget.final_s is None else f", the final's estimate {budget.final_s / h:.4f}"
    return (f"budget: {budget.spent_s / h:.4f} of {budget.limit_s / h:.4f} GPU-h spent{money}; "
            f"{max(budget.left_s, 0) / h:.4f} left for navigation, {budget.kept_s / h:.4f} kept for the final "
            f"(reserve {budget.reserve_s / h:.4f}{final})")


def _speedup(step: Step, coords: tuple[str, ...], rung: int) -> str:
    e = step.decision.current.get(coords)
    anchor = [x for p in step.plan.dev_ids[:rung] for x in step.observed.anchor_latencies.get(p, ())]
    if e is None or e.latency is None or not anchor:
        return "n/a"
    return f"{statistics.median(anchor) / e.latency:.2f}x"


def cell_table(step: Step) -> list[str]:
    d, exp = step.decision, step.exp
    q = exp.quality
    rows = [("", "cell", "rung", "n", f"Δ {q.metric} [95% CI]", "p Wilcoxon", "p parity", "verdict", step.plan.objective.unit,
             "speed-up")]
    order = sorted(d.current, key=lambda c: (d.current[c].latency is None, d.current[c].latency or 0.0, c))
    for coords in order:
        e = d.current[coords]
        ci = f"{signed(e.mean)} [{signed(e.low)}, {signed(e.high)}]" if e.low is not None else signed(e.mean)
        mark = "*" if coords == d.incumbent else "+" if coords in d.frontier else ""
        rows.append((mark, exp.label(coords), str(e.rung), f"{e.n}" + (f"/{e.rung}" if e.missing else ""), ci,
                     num(e.wilcoxon_holm, 2), num(e.tost_p, 2), e.verdict, num(e.latency),
                     _speedup(step, coords, e.rung)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    left = (0, 1, 4, 7)  # mark, cell, interval, verdict
    return ["  " + "  ".join(v.ljust(w) if i in left else v.rjust(w)
                             for i, (v, w) in enumerate(zip(r, widths, strict=True))) for r in rows]


def amendment_lines(exp: Any) -> list[str]:
    """The decision rule's recorded amendments: every generation and report shows them."""
    return [f"  rule amended {a.get('at', '?')}: {'; '.join(a.get('changes') or [])} (why: {a.get('reason')})"
            for a in exp.amendments]


def format_step(step: Step) -> str:
    d, exp, plan = step.decision, step.exp, step.plan
    q = exp.quality
    where = os.path.relpath(step.path) if not os.path.isabs(str(exp.out_root)) else str(step.path)
    lines = [f"experiment {exp.name}: generation {d.generation} "
             + ("(recorded in " if step.new else "(already recorded, not rendered yet: ") + f"{where})",
             budget_line(step.budget)]
    lines += amendment_lines(exp)
    if d.current:
        lines.append(f"cells on {exp.dev.option} ({q.metric} delta to the anchor; parity: {parity_text(q.test, q.band, q.alpha)}; "
                     f"Wilcoxon Holm-adjusted across each rung's cells; * incumbent, + frontier; objective "
                     f"{plan.objective.text}, speed-up against the anchor in its units):")
        lines += cell_table(step)
    else:
        lines.append(f"no cell of the grid has scored samples on {exp.dev.option} yet")
    for coords, cell in sorted(step.observed.cells.items()):
        if cell.failed:
            lines.append(f"  failed: {exp.label(coords)}: {cell.failed}")
        if cell.drift:
            lines.append(f"  {exp.label(coords)}: {cell.drift} (never crowned)")
        if cell.unavailable:
            lines.append(f"  {exp.label(coords)}: {len(cell.unavailable)} prompt(s) without {q.metric}: "
                         f"{next(iter(cell.unavailable.values()))}")
    lines += [f"  note: {n}" for n in step.observed.notes]
    lines += [f"  ignored: {n}" for n in step.observed.ignored]
    if step.observed.holdout_runs:
        lines.append(f"  WARNING: {len(step.observed.holdout_runs)} run(s) of the holdout exist before the final: "
                     + ", ".join(step.observed.holdout_runs[:3]))
    lines += [r for r in d.reasons if not r.startswith("pruned")]
    if d.pruned:
        new = f" (new: {', '.join(f'{a}={v}' for a, v in d.newly_pruned)}: off the frontier two decisions running)" \
            if d.newly_pruned else ""
        lines.append("pruned families: " + ", ".join(f"{a}={v}" for a, v in d.pruned) + new)
    if d.stop:
        lines.append(f"decision: STOP: {d.stop}")
        lines.append(f"next: assess climb {exp.name} --final    # once: the incumbent, the anchor and a steps-only "
                     f"control on {exp.holdout.option}")
        return "\n".join(lines)
    lines.append(f"decision: continue ({d.note})")
    for p in d.proposals:
        cost = f", est. {p.est_s:.2g} s" if p.est_s is not None else ""
        lines.append(f"  {p.kind:<10} {plan.label(p.coords)} -> rung {p.rung}: {p.reason}{cost}")
    for p, why in d.dropped:
        lines.append(f"  dropped    {plan.label(p.coords)} -> rung {p.rung}: {why}")
    total = f" (est. {d.est_s:.2g} GPU-s)" if d.est_s is not None else " (no history to estimate the cost from yet)"
    lines.append(f"next{total}:")
    lines += [f"  {c.text}" for c in step.commands]
    return "\n".join(lines)
