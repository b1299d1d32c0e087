"""One verdict: the one recorded under the experiment's frozen rule. A band given on the command line is a "what if",
shown beside it and labelled as such, never in its place: in `assess status` (its table and --json), the sweep and
experiment reports, and the exports.

The recorded verdicts are the final's (its `final-result` in the experiment's ledger: each arm's verdict on the
holdout under the rule in force at the claim), found from the run folders' own run.json (the experiment they name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

WHAT_IF = "what if: band={band} given on the command line, not the experiment's frozen rule"


def recorded_verdicts(run_paths: list[str]) -> dict[str, dict[str, Any]]:
    """cell key -> the verdict recorded for it in its experiment's ledger (with the rule it was decided under)."""
    from render.laws import Ledger, final_result
    from render.rundir import InvalidRunDirectory, experiment_of, read_run_record

    found: dict[str, dict[str, Any]] = {}
    seen: set[tuple[str, str]] = set()
    for path in run_paths:
        try:
            run = read_run_record(path)
        except (OSError, InvalidRunDirectory):
            continue
        experiment = experiment_of(run)
        out_root = run.config.get("out_root") or run.out_root
        if experiment is None or not out_root or (experiment.name, str(out_root)) in seen:
            continue
        name = experiment.name
        seen.add((name, str(out_root)))
        try:
            result = final_result(Ledger(name, Path(out_root)))
        except ValueError:
            continue
        if result is None:
            continue
        for arm in result.get("arms", []):
            verdict = (arm.get("quality") or {}).get("verdict")
            if arm.get("cell_key") and verdict:
                found[arm["cell_key"]] = {
                    "verdict": verdict, "split": "holdout", "role": arm.get("role"), "experiment": name,
                    "rule": {"metric": result.get("metric"), "band": result.get("band"), "alpha": result.get("alpha")},
                    "source": f"the final's result in experiment {name}'s ledger"}
    return found


def label_what_if(quality: dict[str, Any], band: float) -> dict[str, Any]:
    """A cell's per-split answers with a command-line band: each split's verdict moved under `what_if`, labelled."""
    out = {}
    for split, answers in quality.items():
        answers = dict(answers)
        verdict = answers.pop("verdict", None)
        answers["what_if"] = {"band": band, "verdict": verdict, "label": WHAT_IF.format(band=band)}
        out[split] = answers
    return out


def recorded_text(recorded: dict[str, Any]) -> str:
    """A recorded verdict in words: the verdict, where and under which rule it was decided, and its source."""
    rule = recorded.get("rule") or {}
    return (f"{recorded['verdict']} (recorded on the {recorded.get('split')} as the final's {recorded.get('role')}, "
            f"under experiment {recorded.get('experiment')}'s frozen rule: {rule.get('metric')} band {rule.get('band')} "
            f"alpha {rule.get('alpha')}; {recorded.get('source')})")


def what_if_text(band: float, verdicts: dict[str, Any]) -> str:
    """A command-line band's verdicts per split, labelled as a what-if."""
    shown = ", ".join(f"{split}: {verdict}" for split, verdict in verdicts.items()) or "no verdict"
    return f"{WHAT_IF.format(band=band)}: {shown}"


def verdict_lines(cells: list[tuple[str, str]], recorded: dict[str, dict[str, Any]], band: float | None = None,
                  what_if: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """The verdict lines of `cells` (name, cell key), for a human: the recorded verdict first, then the what-if of
    a command-line band beside it (labelled); a cell without a recorded verdict says so when a band is given."""
    lines: list[str] = []
    for name, key in cells:
        mine = recorded.get(key)
        guess = (what_if or {}).get(key)
        if mine is None and guess is None:
            continue
        lines.append(f"  {name}: verdict " + (recorded_text(mine) if mine else "none recorded (no final of an "
                                                "experiment decided this cell)"))
        if band is not None and guess is not None:
            lines.append(f"    {what_if_text(band, guess)}")
    return ["verdicts (the recorded one under the frozen rule; a --band is a what-if beside it):", *lines] \
        if lines else []
