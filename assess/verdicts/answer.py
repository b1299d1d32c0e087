"""The one sentence a sweep's verdict table comes to: the fastest cell at parity, or why there is none yet, and the
one next command. The report puts it above its table; `assess score`, `assess status` and `assess retime` end with it.
An experiment's report opens with its own, from the same pieces: the final's winner (final_sentence) or, before the
final, where the climb stands (climb_sentence).

It reads the verdict table's rows (assess.verdicts.table.row): each cell's verdict under the rule, its speed-up with its
interval and how it was timed, and how many prompts decided it. An undecided cell says how many prompts would decide
it at this band, from its own deltas (a one-sided t power calculation at 80 % power: a planning figure, not a
promise), and the command that renders them (skip-if-done renders only the new prompts).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assess.statistics.side_by_side import TIMED_APART

POWER_Z = 0.8416  # z of 80 % power
# what renders more prompts of a split, for the prompts override a sweep was rendered with
LARGER = {"smoke": "prompts=dev", "dev": "seed=[0,1]", "suite-dev": "seed=[0,1]"}


def prompts_to_decide(deltas: Sequence[float], band: float, higher_is_better: bool, alpha: float) -> int | None:
    """About how many prompts make a non-inferiority test at `band` decide parity, at the deltas' mean and spread
    (None: their mean is already past the band, or they have no spread to plan with)."""
    from scipy.stats import norm

    if len(deltas) < 2:
        return None
    mean = statistics.fmean(deltas) * (1 if higher_is_better else -1)
    sd = statistics.stdev(deltas)
    margin = mean + band
    if margin <= 0 or sd == 0:
        return None
    return max(len(deltas) + 1, math.ceil(((norm.ppf(1 - alpha) + POWER_Z) * sd / margin) ** 2))


def _undecided(rows: Sequence[dict[str, Any]], what: str) -> str:
    n = max(r.get("n_prompts", 0) for r in rows)
    needed = [r["needed"] for r in rows if r.get("needed")]
    about = f"; about {max(needed)} prompts would decide them at this band" if needed else ""
    return f"{len(rows)} {what} undecided on {n} prompts{about}"


def _speed(row: dict[str, Any]) -> str:
    timed = str(row.get("timed", ""))
    if timed.startswith(TIMED_APART):
        return f"{row['speedup']} ({timed}: `assess retime` times it side by side)"
    return f"{row['speedup']} ({timed})"


def _not_surely_faster(row: dict[str, Any], sweep: str) -> str:
    """A side-by-side speed-up whose interval reaches 1× or below is not yet shown to be a speed-up: one slow round
    of a short timing round widens it so (6 rounds give the [min, max] of their ratios); `assess retime` times more."""
    low = row.get("speed_low")
    if low is None or low > 1 or str(row.get("timed", "")).startswith(TIMED_APART):
        return ""
    return (f" Not yet surely faster: its interval reaches {low:.2f}× (`assess retime {sweep}` times "
            "more rounds side by side).")


def _cheapest(parity: Sequence[dict[str, Any]], fastest: dict[str, Any]) -> str:
    """With batched cells at parity, the throughput answer beside the latency one: the cell with the fewest GPU-seconds
    per image (the most images per GPU-hour), when it is not the fastest."""
    costed = [r for r in parity if r.get("gpu_s_image") is not None]
    if not any(r.get("batch", 1) > 1 for r in costed):
        return ""
    cheapest = min(costed, key=lambda r: r["gpu_s_image"])
    if cheapest is fastest:
        return ""
    return (f" Most images per GPU-hour at parity: {cheapest['label']}, {cheapest['cost']} per 1,000 images "
            f"({fastest['cost']} for the fastest).")


def next_render(rows: Sequence[dict[str, Any]], prompts: str) -> str:
    """The command that renders more prompts for these rows' cells."""
    parsed: dict[str, list[str]] = {}
    for r in rows:
        for part in str(r["label"]).split():
            key, sep, value = part.partition("=")
            if sep and value not in parsed.setdefault(key, []):
                parsed[key].append(value)
    axes = " ".join(f"{k}={','.join(v)}" for k, v in parsed.items())
    larger = LARGER.get(prompts, "seed=[0,1]")
    return f"python -m render -m {axes} {larger}".replace("  ", " ").strip()


@dataclass(frozen=True)
class Answer:
    text: str  # the sentence
    next: str  # the one next command

    def __str__(self) -> str:
        return f"{self.text} Next: `{self.next}`"


def fastest_at_parity(table: dict[str, Any]) -> dict[str, Any] | None:
    """The verdict table's answer: its fastest row at parity (side-by-side speed-ups before those timed apart), None
    when no cell is at parity. The sentence and the winner file (assess.winner.judged) both name it."""
    parity = [r for r in table["rows"] if not r["is_anchor"] and r["verdict"] == "parity"]
    if not parity or table.get("band") is None:
        return None
    return max(parity, key=lambda r: (not str(r.get("timed", "")).startswith(TIMED_APART), r.get("speed_value") or 0.0))


def sentence(table: dict[str, Any], prompts: str = "smoke", sweep: str = "<sweep>") -> Answer:
    """The answer of a verdict table (assess.verdicts.table.context) in one sentence, with the one next command."""
    rows = [r for r in table["rows"] if not r["is_anchor"]]
    band = table.get("band")
    report = f"assess report {sweep}"
    if not rows:
        return Answer("No cell to judge yet.", f"assess score {sweep}")
    if band is None:
        return Answer(f"No verdict: no parity band ({table['rule']}).", f"{report} --band B")
    parity = [r for r in rows if r["verdict"] == "parity"]
    metric = table["metrics"][0]
    best = fastest_at_parity(table)
    if best is not None:
        text = (f"Fastest at parity: {best['label']}, {_speed(best)} faster than the anchor, {metric} within "
                f"{band:g} of it on {best.get('n_prompts', 0)} prompts.") + _cheapest(parity, best)
        unsure = _not_surely_faster(best, sweep)
        faster = [r for r in rows if r["verdict"] == "undecided" and (r.get("speed_value") or 0.0)
                  > (best.get("speed_value") or 0.0)]
        if faster:  # a faster cell may still be at parity: more prompts tell (and the new sweep times them again)
            return Answer(f"{text}{unsure} {_undecided(faster, 'faster cell(s)')}.", next_render(faster, prompts))
        if unsure:
            return Answer(text + unsure, f"assess retime {sweep}")
        return Answer(text, report)
    undecided = [r for r in rows if r["verdict"] == "undecided"]
    if undecided:
        return Answer(f"No cell at parity yet: {_undecided(undecided, 'cell(s)')} ({metric}, band {band:g}).",
                      next_render(undecided, prompts))
    if all(r["verdict"] == "out" for r in rows):
        return Answer(f"No cell of this sweep is at parity: every one is out at band {band:g} on {metric}; try "
                      "gentler settings (more steps, a lower cache threshold), or a band of your own.",
                      f"{report} --band B")
    return Answer(f"No verdict yet: the cells have no {metric} deltas to the anchor.", f"assess score {sweep}")


# -- an experiment's answer: the final's, or where the climb stands ---------------------------------------------


@dataclass(frozen=True)
class Final:
    """What the answer of a climb's final reads: its winner, holdout verdict and speed-ups (assess.climb builds it
    from the recorded final). A speed-up is a row-like dict: `speedup` (its text with the interval) and `timed`."""

    experiment: str
    winner: str  # the incumbent's overrides
    verdict: str | None  # parity | out | undecided on the holdout
    metric: str
    band: float
    n_prompts: int
    over_anchor: dict[str, Any]
    over_control: dict[str, Any] | None  # None: no steps-only control to compare with (control_note says why)
    control_note: str
    run_line: str  # the command that renders the winner


def _holdout_verdict(f: Final) -> str:
    if f.verdict == "parity":
        return f"at parity on the holdout ({f.metric} within {f.band:g} of the anchor on {f.n_prompts} prompts)"
    if f.verdict in ("out", "undecided"):
        return f"{f.verdict} on the holdout ({f.metric}, band {f.band:g}, {f.n_prompts} prompts)"
    return f"not judged on the holdout yet ({f.n_prompts} prompts scored)"


def final_sentence(f: Final) -> Answer:
    """The answer of a climb's final in one sentence: the winner as its overrides, its holdout verdict, its speed-up
    over the anchor and over the steps-only control with their intervals and how they were timed; next, the command
    that renders the winner (a winner not at parity: the report that says why)."""
    control = (f"{_speed(f.over_control)} faster than the steps-only control" if f.over_control
               else f"no steps-only control to compare with ({f.control_note or 'not rendered on the holdout'})")
    text = (f"Final: {f.winner}, {_holdout_verdict(f)}; {_speed(f.over_anchor)} faster than the anchor, "
            f"{control}.")
    return Answer(text, f.run_line if f.verdict == "parity" else f"assess report {f.experiment}")


def climb_sentence(experiment: str, incumbent: dict[str, Any] | None, status: str, generation: int,
                   stop: str | None, note: str) -> Answer:
    """Before the final, where the climb stands in one sentence: its incumbent (a verdict table row: its label,
    verdict, speed-up and prompts) and whether it stopped; next, `--final` once it has, else the next generation."""
    if incumbent is None or status == "start":
        where = "no cell at parity yet"
    else:
        where = (f"incumbent ({status}) {incumbent['label']}: {incumbent['verdict']} on "
                 f"{incumbent.get('n_prompts', 0)} dev prompts, {_speed(incumbent)} faster than the anchor")
    if stop:
        return Answer(f"No final yet: after generation {generation}, {where}; the climb stopped ({stop}).",
                      f"assess climb {experiment} --final")
    return Answer(f"No final yet: after generation {generation}, {where}; the climb goes on ({note}).",
                  f"assess climb {experiment} --apply")
