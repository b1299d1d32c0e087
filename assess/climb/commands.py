"""The render commands a decision proposes, and running them (`--apply`, `--final`).

A generation's cells become as few one-factor multiruns as possible (decide.group_commands); each
names every axis, so the cell does not depend on defaults. Running a command streams its output,
finds the sweep folder it made under <out_root>/multirun/, and scores it (only the experiment's
quality metric: speed comes with the samples).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from assess.climb.decide import Plan, Proposal, group_commands
from assess.errors import AssessError
from assess.experiment import Experiment
from render.rundir.redact import redact
from render.run.signals import forward_signals, send_to

Log = Callable[[str], None]


@dataclass(frozen=True)
class Command:
    words: tuple[str, ...]  # after `python -m render -m`

    @property
    def text(self) -> str:
        return " ".join(shlex.quote(w) for w in ["python", "-m", "render", "-m", *self.words])


def generation_commands(exp: Experiment, plan: Plan, proposals: Sequence[Proposal]) -> list[Command]:
    out = []
    for rung, values in group_commands(plan, proposals):
        words = [*exp.base_overrides(), f"prompts={exp.dev.option}", f"prompts.limit={rung}", *exp.seed_overrides(),
                 *(f"{a}={','.join(v)}" for a, v in values.items())]
        out.append(Command(tuple(words)))
    return out


def final_command(exp: Experiment, cell: Sequence[str], token: str) -> Command:
    """A holdout render for the final: one cell, given as overrides, carrying the claim's token."""
    return Command((*exp.base_overrides(), "experiment.final=true", f"experiment.final_token={token}",
                    f"prompts={exp.holdout.option}", *exp.seed_overrides(), *cell))


class RenderRefused(AssessError):
    """python -m render exited 2: a preflight or a guard refused the sweep; nothing was written."""

    @property
    def for_budget(self) -> bool:
        """Refused by the experiment's budget admission (render.laws.admission.check_budget)."""
        from render.laws.admission import BUDGET_REFUSAL

        return BUDGET_REFUSAL in str(self)


def _sweep_dirs(out_root: Path) -> set[Path]:
    root = out_root / "multirun"
    return {p for p in root.glob("*/*") if p.is_dir()} if root.is_dir() else set()


def run_command(command: Command, out_root: Path, log: Log) -> tuple[int, list[Path]]:
    """Run one render command, streaming its output; (exit code, the sweep folders it made)."""
    before = _sweep_dirs(out_root)
    log(f"$ {command.text}")
    process = subprocess.Popen([sys.executable, "-m", "render", "-m", *command.words], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert process.stdout is not None
    tail: list[str] = []
    with forward_signals(send_to(process)) as forwarded:  # kill of the climb reaches the render and its cell
        for raw in iter(process.stdout.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n")
            sys.stderr.write(redact(line) + "\n")
            tail = (tail + [line])[-20:]
        code = process.wait()
    made = sorted(_sweep_dirs(out_root) - before)
    forwarded.raise_if_stopped(f"the render command ended with exit {code}, its interrupted cell recorded `cancelled`"
                               + (f"; score what it finished with: assess score {' '.join(map(str, made))}" if made else ""))
    if code == 2:
        errors = [line for line in tail if line.startswith("error:")]
        raise RenderRefused(f"the renderer refused `{command.text}` (exit 2), nothing was rendered: "
                            + (errors[-1][len("error: "):] if errors else "see its output above"))
    return code, made


def run_and_score(commands: Sequence[Command], exp: Experiment, db: Path | None, log: Log
                  ) -> tuple[list[Path], RenderRefused | None]:
    """Run the commands in turn (until one is refused), then score the sweeps they made.
    Returns those sweeps and the refusal, if any."""
    from assess.scoring.ingest import score

    sweeps: list[Path] = []
    failed = []
    refused = None
    for command in commands:
        try:
            code, made = run_command(command, exp.out_root, log)
        except RenderRefused as exc:
            refused = exc
            break
        sweeps += made
        if code != 0:
            failed.append(f"exit {code}: {command.text}")
    if sweeps:
        summary = score(sweeps, db, metrics=[exp.quality.metric])
        log(summary.lines()[0])
    for line in failed:
        log(f"some cells failed ({line}); the climb sees them as failed cells (assess status <sweep>)")
    return sweeps, refused
