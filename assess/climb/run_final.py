"""`assess climb <experiment> --final`: once, the incumbent, the anchor and a steps-only control on the holdout.

The final is claimed first, once, in the experiment's ledger (render.laws.final: a second claim is
refused with the date of the first, from any out_root or working folder); only then may the renderer
touch the holdout, and only for commands that carry the claim's token. The steps-only control is the
anchor with the incumbent's number of steps and no cache: the baseline every cache method must beat.

The holdout results are computed under the decision rule in force at the claim (its band and alpha),
recorded in the ledger when the final completes (which spends the token), and shown from there by
every later `--final` and report; `final-result.json` in the experiment folder is a copy.

Longer than the house's ~300 lines: claiming, rendering and reading the final's three arms are one
procedure; its statistics are assess.statistics.compare'.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from assess.climb.commands import Command, final_command, run_and_score
from assess.climb.evaluate import evaluate
from assess.climb.generation import _observe, replay
from assess.climb.plan import IncumbentStatus
from assess.climb.observe import experiment_runs, quality_deltas, sample_table, sync_run_experiments, typical_reference
from assess.climb.archive import experiment_dir
from assess.errors import AssessError
from assess.experiment import Experiment, load_experiment
from assess.index.database import Index
from assess.statistics.compare import mean_interval, parity_verdict
from render.laws.restart import reuse_note
from render.laws.rule import rule_test
from render.rundir import cell_key_of

Log = Callable[[str], None]
RESULT = "final-result.json"


class FinalRefused(AssessError):
    """The final cannot run (already claimed, the climb not stopped, no cell at parity)."""


def control_overrides(exp: Experiment, steps: int) -> list[str]:
    """The steps-only control: the anchor's settings with the incumbent's steps and no cache."""
    a = exp.anchor
    return [f"steps={steps}", "cache=none", f"attention={a['attention']}", f"scheduler={a['scheduler']}"]


@dataclass
class Arm:
    role: str  # incumbent | control | anchor
    overrides: list[str]
    cell_key: str | None
    quality: dict[str, Any] | None = None  # the holdout Evaluation vs the anchor, as a dict
    speedup: dict[str, Any] | None = None  # vs the anchor, as a dict: side by side when timed so (the headline)
    n_samples: int = 0
    note: str | None = None
    render_speedup: dict[str, Any] | None = None  # vs the anchor from the render-time latencies, shown beside it
    timed: str | None = None  # how `speedup` was timed: "side by side" | "timed apart"


@dataclass
class FinalResult:
    experiment: str
    claimed_at: str
    incumbent: dict[str, str]
    incumbent_line: str  # the runnable override line
    metric: str
    band: float
    alpha: float
    arms: list[Arm]
    parity: str | None  # parity | out | undecided on the holdout (TOST at alpha, one pre-planned test)
    vs_control: dict[str, Any] = field(default_factory=dict)  # speed-up and quality difference, incumbent vs control
    commands: list[str] = field(default_factory=list)
    sweeps: list[str] = field(default_factory=list)
    reuse: str | None = None  # after a recorded restart over a holdout already used: the verdict says it is a reuse

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def arm(self, role: str) -> Arm:
        return next(a for a in self.arms if a.role == role)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FinalResult:
        return cls(**{**data, "arms": [Arm(**a) for a in data.get("arms", [])]})


# -- results --------------------------------------------------------------------------------


def _holdout_arm(index: Index, exp: Experiment, role: str, overrides: list[str], key: str | None,
                 anchor_key: str | None) -> tuple[Arm, dict[str, float]]:
    from assess.statistics.compare import render_speedup, speed_against

    if key is None:
        return Arm(role, overrides, None, note="not rendered on the holdout"), {}
    rendered, latencies, _ = sample_table(index, exp, key, exp.holdout.split, typical_reference(index, exp.holdout.split))
    deltas, unscored, _unavailable = quality_deltas(index, exp, key, anchor_key, exp.holdout.split, rendered)
    arm = Arm(role, overrides, key, n_samples=len(rendered) * len(exp.seeds))
    if unscored:
        arm.note = f"{len(unscored)} holdout prompt(s) not scored yet"
    ids = [p for p in exp.holdout.ids if p in rendered]
    e = evaluate(deltas, latencies, ids, exp.quality.band, test=exp.quality.test,
                 higher_is_better=exp.quality.direction == "higher")
    arm.quality = {**e.as_dict(), "verdict": parity_verdict(e.tost_p, e.out_p, exp.quality.alpha, e.n)}
    if role != "anchor" and anchor_key is not None and key != anchor_key:
        render = render_speedup(index, key, anchor_key, exp.holdout.split)
        speed, arm.timed = speed_against(index, key, anchor_key, render)
        arm.speedup, arm.render_speedup = (speed.as_dict() if speed else None), (render.as_dict() if render else None)
    return arm, deltas


def _final_keys(index: Index, exp: Experiment, incumbent: dict[str, Any], steps: int
                ) -> tuple[str | None, str | None, str | None]:
    """(incumbent, control, anchor) cell keys among the experiment's holdout runs."""
    runs = [r for r in experiment_runs(index, exp.name) if r["split"] == exp.holdout.split]
    keys = {r["cell_key"] for r in runs}
    inc_key = incumbent.get("cell_key")
    if inc_key not in keys:
        wanted = exp.coords_of(incumbent["cell"])
        inc_key = next((r["cell_key"] for r in runs if not r["is_anchor"]
                        and exp.coords_of_cell(json.loads(r["cell"])) == wanted), None)
    anchor_runs = [r for r in runs if r["is_anchor"]]
    anchor_key = anchor_runs[0]["cell_key"] if anchor_runs else None
    control_key = None
    if anchor_runs:
        control_key = cell_key_of({**json.loads(anchor_runs[0]["cell"]), "steps": steps})
    return inc_key, control_key if control_key in keys else None, anchor_key


def claim_quality(exp: Experiment, final: dict[str, Any]) -> tuple[float, float]:
    """(band, alpha) of the decision rule in force when the final was claimed (the composed one for older claims)."""
    quality = (final.get("rule") or {}).get("quality") or {}
    return float(quality.get("band", exp.quality.band)), float(quality.get("alpha", exp.quality.alpha))


def final_result(index: Index, exp: Experiment, final: dict[str, Any]) -> FinalResult:
    """The holdout comparison of the claimed final's incumbent, control and anchor, from the index, under the rule
    in force at the claim."""
    from dataclasses import replace

    band, alpha = claim_quality(exp, final)
    test = rule_test(final["rule"]) if final.get("rule") else exp.quality.test  # the test in force at the claim
    exp = replace(exp, quality=replace(exp.quality, band=band, alpha=alpha, test=test))
    sync_run_experiments(index)
    inc = final["incumbent"]
    steps = int(inc.get("steps", exp.default_steps))
    inc_key, control_key, anchor_key = _final_keys(index, exp, inc, steps)
    incumbent, inc_deltas = _holdout_arm(index, exp, "incumbent", inc["overrides"], inc_key, anchor_key)
    control, control_deltas = _holdout_arm(index, exp, "control", final["control"]["overrides"], control_key,
                                           anchor_key)
    anchor, _ = _holdout_arm(index, exp, "anchor", final["anchor"]["overrides"], anchor_key, anchor_key)
    if control_key is not None and control_key == inc_key:
        control.note = "the control is the incumbent itself (no cache, the anchor's settings)"
    if control_key is not None and control_key == anchor_key:
        control.note = "the control is the anchor itself (the incumbent has the anchor's steps)"
    result = FinalResult(exp.name, final.get("claimed_at") or final.get("at", "?"), inc["cell"], " ".join(inc["overrides"]),
                         exp.quality.metric, exp.quality.band, exp.quality.alpha, [incumbent, control, anchor],
                         incumbent.quality["verdict"] if incumbent.quality else None,
                         commands=list(final.get("commands", [])), reuse=reuse_note(exp.ledger))
    result.vs_control = _versus(index, exp, inc_key, control_key, inc_deltas, control_deltas)
    return result


def _versus(index: Index, exp: Experiment, inc_key: str | None, control_key: str | None,
            inc_deltas: dict[str, float], control_deltas: dict[str, float]) -> dict[str, Any]:
    from assess.statistics.compare import render_speedup, speed_against

    if inc_key is None or control_key is None or inc_key == control_key:
        return {}
    render = render_speedup(index, inc_key, control_key, exp.holdout.split)
    estimate, timed = speed_against(index, inc_key, control_key, render)
    shared = sorted(set(inc_deltas) & set(control_deltas))
    diffs = [inc_deltas[p] - control_deltas[p] for p in shared]
    interval = mean_interval(diffs) if diffs else None
    return {"speedup": estimate.as_dict() if estimate else None, "timed": timed,
            "render_speedup": render.as_dict() if render else None,
            "quality_diff": {"value": interval.value if interval else None, "low": interval.low if interval else None,
                             "high": interval.high if interval else None, "n": len(diffs)}}


# -- the final ------------------------------------------------------------------------------


def _incumbent(exp: Experiment, index: Index, db: Path | None, force: bool, log: Log) -> tuple[Any, Any, Any]:
    observed = _observe(index, exp, db, True, log)
    again = replay(exp, observed)
    decision, history = again.decision, again.prior
    budget = decision.budget
    assert budget is not None  # decide() sets it on every decision
    if decision.incumbent_status == IncumbentStatus.START:
        raise FinalRefused(f"experiment {exp.name}: no cell is at parity on {exp.dev.option}; nothing to take to the "
                           f"holdout (climb on: assess climb {exp.name} --apply)")
    cost = budget.final_s
    if cost is not None and cost > budget.limit_s - budget.spent_s:
        raise FinalRefused(f"experiment {exp.name}: the final needs an estimated {cost / 3600:.4f} GPU-h but only "
                           f"{max(budget.limit_s - budget.spent_s, 0) / 3600:.4f} are left (reserve included); nothing "
                           "was claimed. Raise experiment.budget.gpu_hours by a recorded amendment (assess climb "
                           f"{exp.name} --set experiment.budget.gpu_hours=... --amend \"<why>\")")
    if decision.stop is None and not force:
        raise FinalRefused(f"experiment {exp.name}: the climb has not stopped (incumbent "
                           f"{exp.label(decision.incumbent)}, {decision.incumbent_status}); continue with "
                           f"`assess climb {exp.name} --apply`, or pass --force to spend the holdout now")
    return observed, decision, len(history)


def final_cells(exp: Experiment, commands_overrides: list[list[str]]) -> list[str]:
    """The cell keys a final renders on the holdout: each command's cell and its companions, the anchor and a parallel
    cell's width-1 twin (composed as the renderer will compose them)."""
    from assess.experiment import compose
    from render.cell import build_job, companions

    keys: list[str] = []
    for overrides in commands_overrides:
        job = build_job(compose([*exp.base_overrides(), *overrides]))
        keys += [job.cell.key, job.anchor.key, *(c.cell.key for c in companions(job))]
    return sorted(set(keys))


def holdout_evidence(exp: Experiment, index: Index) -> str | None:
    """Why the holdout is no longer fresh (a claim in the index, or its samples already rendered), or None."""
    from render.laws import holdout_samples
    from render.laws.holdout import spent_elsewhere
    from render.compose.splits import Prompt

    prompts = [Prompt(i, t) for i, t in zip(exp.holdout.ids, exp.holdout.texts, strict=True)]
    claimed = final_in_index(index, exp.name, prompts)
    if claimed:
        return claimed
    spent = spent_elsewhere(exp.ledger, prompts)
    if spent:
        return spent
    from render.laws.lock import known_roots

    # every root the ledger knows and every root a render on this machine launched into, whenever it was rendered
    roots = list(dict.fromkeys([*exp.ledger.out_roots(), *known_roots()]))
    found = holdout_samples(roots, prompts) or holdout_in_index(index, prompts)
    if found:
        return (f"the holdout is contaminated: {len(found)} run folder(s) already hold samples of its texts (e.g. "
                f"{found[0]}), rendered before the final by an older version or by hand; a final on it would not "
                "be an unseen test. Give the experiment a fresh holdout manifest")
    return None


def final_in_index(index: Index, name: str, prompts: Sequence[Any]) -> str | None:
    """A final the index records on these holdout texts, by content (any experiment name) or under this name: why
    the holdout is spent, or None."""
    from render.rundir import holdout_identity

    mine = {holdout_identity(p.text) for p in prompts}
    for row in index.query("SELECT experiment, claimed_at, holdout FROM finals ORDER BY claimed_at"):
        shared = mine & set(json.loads(row["holdout"] or "[]"))
        if row["experiment"] == name:
            return f"the index records its final as claimed on {row['claimed_at']}"
        if shared:
            return (f"the index records the final of experiment {row['experiment']} (claimed on {row['claimed_at']}) "
                    f"on {len(shared)} of its holdout texts: the holdout is spent, whatever this experiment is called")
    return None


def holdout_in_index(index: Index, prompts: Sequence[Any]) -> list[str]:
    """Run folders the index knows (a shared index: a colleague's out_root, another state folder's preview) that hold
    samples of these texts, by holdout identity (and containment), whatever experiment rendered them."""
    from render.laws.holdout import Reserved
    from render.rundir import holdout_identity

    wanted = Reserved()
    wanted.add("holdout", identities=[holdout_identity(p.text) for p in prompts])
    rows = index.query("SELECT prompt, MIN(run_path) AS run FROM samples WHERE prompt IS NOT NULL GROUP BY prompt")
    return sorted({str(r["run"]) for r in rows if r["prompt"] in wanted})


def run_final(name: str, db: Path | None = None, out_root: Path | None = None, overrides: Sequence[str] = (),
              force: bool = False, log: Log = print) -> FinalResult:
    """Claim the final once (by evidence: the experiment's ledger), render the incumbent, the steps-only control and
    the anchor on the holdout, score them, and record the result (spending the claim's token). A claimed final that
    did not finish is resumed, never repeated; a finished one is shown, from any folder, and nothing is rendered."""
    import secrets

    from render.laws import FinalAlreadyClaimed, claim_final, complete_final, content_hash, final_record, open_claim
    from render.laws import final_result as recorded_result
    from render.compose.splits import Prompt

    exp = load_experiment(name, overrides, out_root, strict=False)
    ledger = exp.ledger
    done = recorded_result(ledger)
    if done is not None:
        log(f"the final of {name} is complete (claimed on {done.get('claimed_at', '?')}): its recorded result; "
            "nothing is rendered")
        return FinalResult.from_dict(done)
    if exp.rule_problem:
        raise FinalRefused(exp.rule_problem)
    holdout = [Prompt(i, t) for i, t in zip(exp.holdout.ids, exp.holdout.texts, strict=True)]
    content = content_hash(holdout)
    first = open_claim(ledger, content) or final_record(ledger)
    with Index.open(db) as index:
        if first is not None:
            log(f"resuming the claimed final of {name} (claimed on {first.get('at', '?')}): finished samples are skipped")
            commands = [Command(tuple(words)) for words in first.get("words", [])]
            claim = first
        else:
            evidence = holdout_evidence(exp, index)
            if evidence:
                raise FinalRefused(f"experiment {name}: no final can be claimed: {evidence}")
            observed, decision, generations = _incumbent(exp, index, db, force, log)
            inc = decision.incumbent
            steps = exp.steps_of(inc)
            token = secrets.token_hex(8)
            cells = [exp.cell_overrides(inc), control_overrides(exp, steps)]
            commands = [final_command(exp, cell, token) for cell in cells]
            payload = {
                "generation": generations,
                "incumbent": {"cell": exp.as_dict(inc), "overrides": exp.cell_overrides(inc), "steps": steps,
                              "cell_key": observed.keys.get(inc), "status": decision.incumbent_status,
                              "dev": _dev_summary(decision, inc)},
                "control": {"overrides": control_overrides(exp, steps)},
                "anchor": {"overrides": [f"{k}={v}" for k, v in exp.anchor.items()]},
                "stop": decision.stop,
                "token": token,
                "rule": exp.rule,  # the verdict is the one under the rule in force at the claim
                "cells": final_cells(exp, [[f"prompts={exp.holdout.option}", *cell] for cell in cells]),
                "commands": [c.text for c in commands],
                "words": [list(c.words) for c in commands],
            }
            try:
                claim = claim_final(ledger, payload, content, holdout)
            except FinalAlreadyClaimed as error:
                mine = final_record(ledger)
                raise FinalRefused(_already(exp, mine) if mine else str(error)) from None
            log(f"claimed the final of {name}: {exp.label(inc)} on {exp.holdout.option}")
        sweeps, refused = run_and_score(commands, exp, db, log)
        if refused:
            raise FinalRefused(f"{refused} The final is claimed: fix the cause, then run `assess climb {name} --final` "
                               "again to resume it (finished samples are skipped)")
        time_final(index, exp, claim, sweeps, db, log)
        result = final_result(index, exp, claim)
    result.sweeps = [str(s) for s in sweeps]
    from render.rundir import atomic_write_json

    complete_final(ledger, claim, result.as_dict())
    atomic_write_json(experiment_dir(exp.out_root, name) / RESULT, result.as_dict())
    write_final_winner(result, exp, log)
    return result


def write_final_winner(result: FinalResult, exp: Experiment, log: Log) -> Path | None:
    """The final's incumbent as winner.yaml in the experiment's folder (assess.winner): what `hypergrid.apply` and
    `assess verify` read. None (and said) when there is none to write."""
    from assess.winner.contract import WINNER, write_winner
    from assess.winner.judged import final_winner
    from render.errors import RenderError

    try:
        winner = final_winner(result, exp)
    except (ValueError, RenderError) as error:  # its runs unreadable, or its overrides no longer compose to its cell
        log(f"no winner file: {error}")
        return None
    if winner is None:
        return None
    path = write_winner(experiment_dir(exp.out_root, exp.name) / WINNER, winner)
    log(f"winner file: {path} (hypergrid.apply(pipe, \"{path}\"); check it where it serves: assess verify {path} "
        "--model <folder or hub id>)")
    return path


FINAL_ROUNDS = 20  # side-by-side rounds of the final's arms: the headline's interval (assess.statistics.side_by_side)


def time_final(index: Index, exp: Experiment, claim: dict[str, Any], sweeps: Sequence[Path], db: Path | None,
               log: Log) -> None:
    """The headline: the final's incumbent, control and anchor timed side by side on one device, over the holdout
    samples they rendered (once: a resumed final that timed them already does not time them again)."""
    from assess.errors import Refused
    from assess.retime import Options, retime_runs

    cells = frozenset(claim.get("cells") or [])
    done = index.query("SELECT count(*) AS n FROM timing_sessions WHERE purpose = 'final' AND experiment = ? "
                       "AND complete = 1", (exp.name,))
    if done[0]["n"]:
        return
    log(f"timing the final's arms side by side ({FINAL_ROUNDS} rounds): the headline speed-up")
    try:
        retime_runs(list(sweeps), db, Options(rounds=FINAL_ROUNDS, every_pair=True, cells=cells or None,
                                              purpose="final", experiment=exp.name), log=log)
    except Refused as refused:  # not admitted: the final's speed-ups are its render-time figures, and say so
        log(f"the final's arms are not timed side by side: {refused}")


def _dev_summary(decision: Any, coords: tuple[str, ...]) -> dict[str, Any] | None:
    e = decision.current.get(coords)
    return None if e is None else {"rung": e.rung, "delta": e.mean, "low": e.low, "high": e.high,
                                   "tost_p": e.tost_p, "objective_value": e.latency}


def _already(exp: Experiment, first: dict[str, Any]) -> str:
    return (f"experiment {exp.name}: the final was already claimed on {first.get('at', '?')} (in its ledger, "
            f"{exp.ledger.state_copy}); the holdout is spent. See `assess report {exp.name}`.")


# -- text -----------------------------------------------------------------------------------


def _interval(d: dict[str, Any] | None, key: str = "value", fmt: str = "{:+.4f}") -> str:
    if not d or d.get(key) is None:
        return "n/a"
    low, high = d.get("low"), d.get("high")
    text = fmt.format(d[key])
    return f"{text} [{fmt.format(low)}, {fmt.format(high)}]" if low is not None and high is not None else text


def speed_text(d: dict[str, Any] | None) -> str:
    """A speed-up with its interval: 2.31x [2.10, 2.52]."""
    return _interval(d, fmt="{:.2f}").replace(" [", "x [", 1) if d and d.get("low") is not None else \
        (f"{d['value']:.2f}x" if d and d.get("value") is not None else "n/a")


def format_final(result: FinalResult) -> str:
    lines = [f"final of experiment {result.experiment} (claimed {result.claimed_at}) on the holdout:",
             f"winner: {result.incumbent_line}   ({result.metric} parity on the holdout: {result.parity}"
             + (", on a reused holdout)" if result.reuse else ")")]
    if result.reuse:
        lines.append(f"  holdout reuse: {result.reuse}")
    for arm in result.arms:
        q = arm.quality or {}
        delta = _interval({"value": q.get("mean"), "low": q.get("low"), "high": q.get("high")})
        speed = speed_text(arm.speedup) if arm.speedup else ("1x" if arm.role == "anchor" else "n/a")
        beside = (f" {arm.timed}; render-time {speed_text(arm.render_speedup)}"
                  if arm.timed and arm.render_speedup else "")
        lines.append(f"  {arm.role:<9} {' '.join(arm.overrides):<58} Δ {result.metric} {delta:<27} speed-up {speed}"
                     + beside + (f"  ({arm.note})" if arm.note else ""))
    if result.vs_control:
        vs = result.vs_control
        lines.append(f"  incumbent vs the steps-only control: speed-up {speed_text(vs.get('speedup'))}, "
                     f"Δ {result.metric} {_interval(vs.get('quality_diff'))}")
    lines.append(f"report: assess report {result.experiment}")
    return "\n".join(lines)
