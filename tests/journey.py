"""The README as a program (issue 58): its journey, read out of README.md in its own order, and what each step shows.

A fenced block right after `<!-- journey -->` is part of the journey, run top to bottom by tests/test_journey.py
against a fresh folder; `<!-- journey: <why not here> -->` marks a block the journey cannot run here, with the reason
(a GPU, a cluster) said where the reader sees it. Two kinds of block:

- a `bash` block: each line is a command (its `# comment` dropped), which must exit 0;
- a transcript (a `text` block of `$ command` lines, each followed by what it prints): the command runs, its exit
  must be 0, and each line shown after it must appear in its output, in order, as a pattern (`expected`): numbers,
  paths and overrides vary from machine to machine, the words do not. A line `...` stands for anything.

The journey starts with the README's first command (its first line, after the last `&&`). A path of a sweep in a
command (`outputs/multirun/2026-11-30/10-04-12-3fa2`, `outputs/multirun/<date>/<time>`) is the sweep the journey's
last render made. A transcript's command that repeats the step just run (the README's first sweep, shown with its
output) is not run again: its lines are read from that step's output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"<!-- journey(?::\s*(?P<why>[^>]*?))?\s*-->\s*\n```(?P<lang>\w*)\n(?P<body>.*?)```", re.S)
SWEEP_PATH = re.compile(r"outputs/multirun/(?:<date>/<time>|\d{4}-\d\d-\d\d/[\w-]+)")


@dataclass
class Step:
    command: str
    expected: list[str] = field(default_factory=list)  # lines the output shows, in order (transcripts only)
    shown_with_previous: bool = False  # a transcript's repeat of the step just run: read, not run again


@dataclass
class Blocked:
    """A journey block that cannot run here, and why (said in the README beside it)."""

    why: str
    commands: list[str]


def first_command(text: str) -> str:
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "README must open with a bash block"
    line = block.group(1).splitlines()[0]
    return line.split("#")[0].split("&&")[-1].strip()


def _commands(body: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", body)  # a command continued on the next line
    return [c for c in (line.split("#")[0].strip() for line in joined.splitlines()) if c]


def _transcript(body: str) -> list[Step]:
    steps: list[Step] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            steps.append(Step(line[2:].strip()))
        elif steps and line.strip():
            steps[-1].expected.append(line)
    return steps


def journey(text: str | None = None) -> tuple[list[Step], list[Blocked]]:
    """The README's journey in its order, and the blocks it cannot run here."""
    text = README.read_text() if text is None else text
    steps, blocked = [Step(first_command(text))], []
    for block in BLOCK.finditer(text):
        body, why = block.group("body"), block.group("why")
        if why:
            blocked.append(Blocked(why.strip(), _commands(body)))
        elif any(line.startswith("$ ") for line in body.splitlines()):
            for step in _transcript(body):
                step.shown_with_previous = step.command == steps[-1].command
                steps.append(step)
        else:
            steps += [Step(c) for c in _commands(body)]
    return steps, blocked


def with_sweep(command: str, sweep: str | None) -> str:
    """The command with the README's example sweep path replaced by the journey's latest sweep."""
    if not SWEEP_PATH.search(command):
        return command
    assert sweep is not None, f"{command!r} names a sweep before the journey made one"
    return SWEEP_PATH.sub(sweep, command)


def _token(token: str) -> str:
    if re.search(r"[\d=/×]", token):  # a number, an override, a path: varies from run to run
        return r"\S+"
    return re.escape(token)


def expected(line: str) -> re.Pattern[str] | None:
    """The pattern of a line a transcript shows (None for `...`): its words literal, its numbers, overrides and paths
    any token; a run of overrides (a cell's name) any run of them. An `answer:` line is its first sentence (the
    sentences after it depend on the cells' intervals)."""
    line = line.strip()
    if line == "...":
        return None
    if line.startswith("answer:"):
        line = re.split(r"(?<=\.) (?=[A-Z0-9])", line, maxsplit=1)[0]
    tokens = line.split()
    parts: list[str] = []
    for token in tokens:
        if "=" in token and parts and parts[-1] == "(?:\\S+=\\S+\\s+)*\\S+=\\S+":
            continue  # one run of overrides
        parts.append("(?:\\S+=\\S+\\s+)*\\S+=\\S+" if re.fullmatch(r"[\w.\-]+=\S+", token) else _token(token))
    return re.compile(r"\s+".join(parts))


def shows(output: str, lines: list[str]) -> list[str]:
    """The expected lines the output does not show in order (empty: it shows them all)."""
    missing, at = [], 0
    rows = output.splitlines()
    for line in lines:
        pattern = expected(line)
        if pattern is None:
            continue
        found = next((i for i in range(at, len(rows)) if pattern.search(rows[i])), None)
        if found is None:
            missing.append(line)
        else:
            at = found + 1
    return missing
