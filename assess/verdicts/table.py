"""The verdict table that opens both reports (the sweep's and the experiment's): the first screen decides.

One row per cell: the cell as its overrides (what differs between the cells; the anchor's full config is collapsed
behind a link), its verdict under the parity rule, its speed-up over the anchor with its interval and how it was
timed, its quality delta to the anchor with its interval per rule metric, the metric's lossless floor next to the
band (assess.statistics.floor), and its cost per 1,000 images in GPU-hours (and money, given a price per GPU-hour).

`speed_of` is the one place the table takes a speed-up from: the cell and its anchor timed side by side when a
session timed them so (`assess retime`, the climb's final: assess.statistics.side_by_side), else the render-time latencies of
the cells' own runs, labelled timed apart (assess.statistics.compare.speed_against).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from assess.statistics.cost import cell_throughput, cost_text
from assess.statistics.width import cell_batch, cell_width, twin_of
from assess.statistics.side_by_side import TIMED_APART
from assess.statistics.compare import Estimate, ParityTest, Verdict, parity_decision, parity_text


@dataclass(frozen=True)
class Speed:
    """A cell's speed-up over its anchor as the verdict table shows it."""

    estimate: Estimate | None
    timed: str  # how: "timed apart" (render latencies), or side by side (assess retime)
    note: str = ""
    gpus: int = 1  # devices the cell holds: a parallel cell's width (render.axes.parallel); its anchor holds one
    # a parallel cell's speed-up over its width-1 twin (the same cell at parallel=none) and how it was timed
    over_twin: Estimate | None = None
    twin_timed: str = ""
    batch: int = 1  # samples per call (render.cell: batch)
    # device seconds an image costs (assess.statistics.cost: the one figure every screen reads); None: no warm call
    gpu_s_per_image: float | None = None

    def text(self) -> str:
        e = self.estimate
        if e is None:
            return "n/a"
        interval = f" [{e.low:.2f}, {e.high:.2f}]" if e.low is not None and e.high is not None else ""
        return f"{e.value:.2f}×{interval}"

    def per_gpu(self) -> str:
        """A parallel cell's speed-up per GPU (its speed-up over its width: the anchor's work per device) and its
        scaling efficiency (its speed-up over its width-1 twin, over its width: 100 % is linear); '' for a
        one-device cell."""
        e = self.estimate
        if self.gpus <= 1 or e is None:
            return ""
        t = self.over_twin
        scaling = ("scaling efficiency n/a (its width-1 twin has no warm latency)" if t is None else
                   f"{100 * t.value / self.gpus:.0f} % scaling efficiency ({t.value:.2f}× over its width-1 twin, "
                   f"{self.twin_timed})")
        return f"{self.gpus} GPUs: {e.value / self.gpus:.2f}× per GPU, {scaling}"


def speed_of(index: Any, cell_key: str, anchor_cell_key: str, rendered: Estimate | None, split: str | None = None
             ) -> Speed:
    """The speed-up the verdict table shows for a cell against its anchor: side by side when a session timed the two
    so, else `rendered` (the estimate from the render-time latencies: assess.statistics.compare.paired_speedup, or the climb's),
    marked timed apart (assess.statistics.compare.speed_against); a parallel cell's over its twin beside it, likewise."""
    from assess.statistics.compare import render_speedup, speed_against

    estimate, timed = speed_against(index, cell_key, anchor_cell_key, rendered)
    gpus, over_twin, twin_timed = cell_width(index, cell_key), None, None
    twin = twin_of(index, cell_key) if gpus > 1 else None
    if twin is not None:
        over_twin, twin_timed = speed_against(index, cell_key, twin, render_speedup(index, cell_key, twin, split)
                                              if split else None)
    cost = cell_throughput(index, cell_key, split)
    return Speed(estimate, timed or TIMED_APART, (estimate.note or "") if estimate else "no warm latency", gpus,
                 over_twin, twin_timed or "", cell_batch(index, cell_key),
                 None if cost is None else cost.gpu_s_per_image.value)


@dataclass(frozen=True)
class Quality:
    """One rule metric's paired delta to the anchor, with the parity verdict when a band is given."""

    metric: str
    deltas: dict[str, float]  # prompt -> cell - anchor (seeds averaged)
    estimate: Estimate | None

    def text(self) -> str:
        e = self.estimate
        if e is None:
            return "n/a"
        interval = f" [{e.low:+.4f}, {e.high:+.4f}]" if e.low is not None and e.high is not None else ""
        return f"{e.value:+.4f}{interval}"


@dataclass(frozen=True)
class Rule:
    """The parity rule a table decides with (an experiment's rule in force, or a sweep report's --band)."""

    metric: str
    band: float | None
    alpha: float = 0.05
    test: str = ParityTest.NONINFERIORITY.value
    higher_is_better: bool = True
    price_per_gpu_hour: float | None = None
    floors: dict[str, Any] = field(default_factory=dict)  # metric -> assess.statistics.floor.Floor (measured), when known
    band_source: str = ""  # where the band comes from (assess.verdicts.default_rule); "" for an experiment's frozen rule

    def text(self) -> str:
        if self.band is None:
            return f"no parity band given: deltas shown, no verdict (give --band in {self.metric} units)"
        return parity_text(self.test, self.band, self.alpha) + f" on {self.metric}"

    def verdict(self, deltas: Sequence[float]) -> Verdict | None:
        if self.band is None:
            return None
        return parity_decision(list(deltas), self.band, self.alpha, self.test, self.higher_is_better)


def floor_text(rule: Rule, metric: str) -> str:
    floor = rule.floors.get(metric)
    if floor is None:
        return "not measured"
    return floor.short(rule.band)


def row(mark: str, label: str, cell_key: str, anchor_cell_key: str, rule: Rule, quality: Sequence[Quality],
        speed: Speed, is_anchor: bool = False, status: str = "",
        decided: Verdict | None = None) -> dict[str, Any]:
    """One row of the verdict table (a dict for the template); `decided`: a verdict the climb already reached under
    the same rule (else the rule decides it from the deltas)."""
    main = next((q for q in quality if q.metric == rule.metric), None)
    verdict = decided if decided is not None or is_anchor or main is None \
        else rule.verdict([main.deltas[p] for p in sorted(main.deltas)])
    verdict_text = ("anchor" if is_anchor else str(verdict) if verdict is not None
                    else "no data" if main is None or not main.deltas else "no band")
    needed = None
    if verdict_text == "undecided" and main is not None and rule.band is not None:
        from assess.verdicts.answer import prompts_to_decide

        needed = prompts_to_decide([main.deltas[p] for p in sorted(main.deltas)], rule.band, rule.higher_is_better,
                                   rule.alpha)
    return {
        "mark": mark, "label": label, "cell_key": cell_key, "anchor_cell_key": anchor_cell_key, "is_anchor": is_anchor,
        "verdict": verdict_text, "verdict_cls": verdict_text.replace(" ", "-"), "status": status,
        "speedup": "1× (reference)" if is_anchor else speed.text(), "timed": "—" if is_anchor else speed.timed,
        "speed_value": speed.estimate.value if speed.estimate is not None else None,
        "speed_low": speed.estimate.low if speed.estimate is not None else None,
        "speed_high": speed.estimate.high if speed.estimate is not None else None,
        "speed_n": speed.estimate.n if speed.estimate is not None else None,
        **_quality_numbers(main),
        "n_prompts": len(main.deltas) if main is not None else 0, "needed": needed,
        "speed_note": speed.note, "per_gpu": speed.per_gpu(),
        "quality": [{"metric": q.metric, "text": "reference" if is_anchor else q.text()} for q in quality],
        "floor": floor_text(rule, rule.metric),
        "cost": cost_text(speed.gpu_s_per_image, rule.price_per_gpu_hour),
        "batch": speed.batch, "gpu_s_image": speed.gpu_s_per_image,
    }


def _quality_numbers(main: Quality | None) -> dict[str, float | None]:
    """The rule metric's delta and its interval as numbers (the winner file's evidence; `quality` holds the text)."""
    e = main.estimate if main is not None else None
    return {"quality_value": e.value if e else None, "quality_low": e.low if e else None,
            "quality_high": e.high if e else None}


def differing(overrides: Sequence[Sequence[str]]) -> list[list[str]]:
    """Each cell's overrides, keeping only those that are not shared by every cell (what tells them apart); a cell
    whose overrides are all shared keeps its first few."""
    from render.rundir import parse_override

    keys = [dict(p for p in (parse_override(o) for o in line) if p is not None) for line in overrides]
    shared = {k for k in set().union(*keys) if all(k in d and d[k] == keys[0].get(k) for d in keys)} if keys else set()
    out = []
    for line, parsed in zip(overrides, keys, strict=True):
        own = [f"{k}={v}" for k, v in parsed.items() if k not in shared and k != "seed" and not k.startswith("prompts")]
        out.append(own or [o for o in line if not o.startswith(("prompts", "seed"))][:3])
    return out


def with_recorded(table: dict[str, Any], splits: Sequence[str | None], recorded: dict[str, dict[str, Any]],
                  what_if_band: float | None) -> dict[str, Any]:
    """One verdict: each row's recorded verdict (assess.verdicts.recorded, decided under its experiment's frozen rule, on the
    split it was decided on) takes the verdict's place; a band given on the command line moves the table's own
    verdicts beside it, labelled what if. Without a recorded verdict, the table is left as it is."""
    from assess.verdicts.recorded import WHAT_IF, recorded_text

    if not recorded:
        return table
    for r, split in zip(table["rows"], splits, strict=True):
        mine = recorded.get(r["cell_key"])
        if mine is not None and mine.get("split") not in (None, split):
            mine = None
        computed = r["verdict"]
        r["what_if"] = computed if what_if_band is not None and not r["is_anchor"] else None
        if mine is not None:
            r["verdict"], r["recorded"] = str(mine["verdict"]), recorded_text(mine)
            r["verdict_cls"] = r["verdict"].replace(" ", "-")
        elif what_if_band is not None and not r["is_anchor"]:
            r["verdict"], r["verdict_cls"] = "none recorded", "none-recorded"
    table["what_if"] = WHAT_IF.format(band=what_if_band) if what_if_band is not None else None
    return table


def sweep_verdict(index: Any, views: Sequence[Any], rule: Rule,
                  recorded: dict[str, dict[str, Any]] | None = None, what_if_band: float | None = None
                  ) -> dict[str, Any]:
    """The verdict table of a sweep report (assess.report.write.CellView rows, in leaderboard order), over each view's
    own scope of (prompt, seed) pairs; `recorded` verdicts take their rows' place (with_recorded)."""
    from assess.metrics import SPECS
    from assess.statistics.compare import mean_interval, quality_deltas

    by_key = {(v.cell_key, v.split): v for v in views}
    labels = differing([v.overrides for v in views if not v.is_anchor])
    label_of = dict(zip([v.cell_key for v in views if not v.is_anchor], labels, strict=True))
    rows, anchors = [], []
    for v in views:
        if v.is_anchor:
            anchors.append({"mark": v.mark, "cell_key": v.cell_key, "config": v.command or v.label})
            rows.append(row(v.mark, "anchor", v.cell_key, v.cell_key, rule, [Quality(rule.metric, {}, None)],
                            speed_of(index, v.cell_key, v.cell_key, None, v.split), is_anchor=True, status=v.status))
            continue
        anchor = by_key.get((v.anchor_cell_key, v.split))
        deltas = quality_deltas(index, v.cell_key, v.anchor_cell_key, v.split, rule.metric, v.keys,
                                anchor.keys if anchor else None) if rule.metric in SPECS else {}
        values = [deltas[p] for p in sorted(deltas)]
        estimate = mean_interval(values) if values else None
        rendered = v.comparison.render_speedup if v.comparison else None
        speed = speed_of(index, v.cell_key, v.anchor_cell_key, rendered, v.split)
        if v.noisy and speed.timed == TIMED_APART:  # the interval is there; the flag says why not to rank on it
            # (assess.statistics.noise); side by side, the render's noise is not in the figure
            speed = replace(speed, timed=f"{speed.timed} ⚠ noisy", note=v.noisy)
        twin = v.same_work_as  # a cell that did the same work as an earlier one names it
        same = f" (same work as {' '.join(label_of.get(twin, [twin[:12]]))})" if twin else ""
        rows.append(row(v.mark, " ".join(label_of[v.cell_key]) + same, v.cell_key, v.anchor_cell_key, rule,
                        [Quality(rule.metric, deltas, estimate)], speed, status=v.status))
    return with_recorded(context(rule, rows, anchors), [v.split for v in views], recorded or {}, what_if_band)


def context(rule: Rule, rows: list[dict[str, Any]], anchors: list[dict[str, Any]]) -> dict[str, Any]:
    return {"rule": rule.text(), "band": rule.band, "band_source": rule.band_source, "price": rule.price_per_gpu_hour,
            "floor": floor_text(rule, rule.metric), "metrics": [rule.metric], "rows": rows, "anchors": anchors,
            "what_if": None}


def speed_rank(timed: str | None, value: float | None) -> tuple[bool, float]:
    """Where a speed-up ranks among a table's rows: every side-by-side figure before every timed-apart one (a
    render-time figure never ranks above a paired one), then the fastest first."""
    return (not timed or timed.startswith(TIMED_APART), -(value if value is not None else float("-inf")))


def experiment_verdict(index: Any, exp: Any, decision: Any, observed: Any, what_if_band: float | None = None
                       ) -> dict[str, Any]:
    """The verdict table of an experiment report: the climb's cells on dev as it sees them now (each at its highest
    scored rung, its verdict the climb's own under the rule in force), the cells timed side by side with the anchor
    first, fastest first within each (speed_rank); with `what_if_band` (a band given on the command line), each cell's
    verdict under it beside the rule's, labelled what if."""
    from assess.verdicts.recorded import WHAT_IF

    from assess.statistics.floor import measure

    q = exp.quality
    floors = measure(index, observed.anchor_key, [q.metric]) if observed.anchor_key else {}
    rule = Rule(q.metric, q.band, q.alpha, q.test, q.direction == "higher", exp.budget.price_per_gpu_hour, floors)
    labels = dict(zip(decision.current, differing([[f"{a}={v}" for a, v in zip(exp.axes, c, strict=True)]
                                                   for c in decision.current]), strict=True))
    anchor_key = observed.anchor_key or ""
    rows = [row("A", "anchor", anchor_key, anchor_key, rule, [Quality(q.metric, {}, None)], speed_of(index, anchor_key, anchor_key, None, exp.dev.split),
                is_anchor=True)]
    cells = sorted((_experiment_cell(index, exp, observed, coords, e) for coords, e in decision.current.items()),
                   key=lambda c: (*speed_rank(c.speed.timed, c.speed.estimate.value if c.speed.estimate else None),
                                  c.latency is None, c.latency or 0.0))
    for i, c in enumerate(cells):
        e = c.evaluation
        estimate = Estimate(e.mean, e.low, e.high, e.n) if e.mean is not None else None
        mark = ("*" if c.coords == decision.incumbent else "") + str(i + 1)
        rows.append(row(mark, " ".join(labels[c.coords]) + f" (rung {e.rung})", c.key, anchor_key, rule,
                        [Quality(q.metric, {}, estimate)], c.speed, decided=e.verdict))
        rows[-1]["n_prompts"], rows[-1]["coords"] = e.n, c.coords  # the rung's prompts; the climb's cell
        if what_if_band is not None:  # the same rung's deltas under the command line's band
            deltas = observed.cells[c.coords].deltas
            guess = replace(rule, band=what_if_band).verdict([deltas[p] for p in exp.dev.ids[:e.rung] if p in deltas])
            rows[-1]["what_if"] = str(guess) if guess is not None else "no data"
    anchors = [{"mark": "A", "cell_key": anchor_key,
                "config": " ".join(f"{k}={v}" for k, v in exp.anchor.items()) + f" (model={exp.model})"}]
    table = context(rule, rows, anchors)
    table["what_if"] = WHAT_IF.format(band=what_if_band) if what_if_band is not None else None
    return table


@dataclass(frozen=True)
class _ClimbCell:
    coords: Any
    evaluation: Any
    key: str
    speed: Speed
    latency: float | None  # the cell's median latency at its rung (the evaluation's latency is the objective's)


def _experiment_cell(index: Any, exp: Any, observed: Any, coords: Any, e: Any) -> _ClimbCell:
    """A climb cell's speed-up over the anchor at its rung, as the verdict table shows it (speed_of)."""
    from assess.statistics.compare import speedup

    key = observed.keys.get(coords, "")
    anchor = [x for p in exp.dev.ids[:e.rung] for x in observed.anchor_latencies.get(p, ())]
    cell = [x for p in exp.dev.ids[:e.rung] for x in observed.cells[coords].latencies.get(p, ())]
    rendered = speedup(anchor, cell) if anchor and cell else None
    return _ClimbCell(coords, e, key, speed_of(index, key, observed.anchor_key or "", rendered, exp.dev.split),
                      statistics_median(cell))


def statistics_median(values: Sequence[float]) -> float | None:
    import statistics

    return statistics.median(values) if values else None
