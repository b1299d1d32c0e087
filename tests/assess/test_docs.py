"""Docs are tested: every command is in assess/README.md, and the README's tables match the code."""

from __future__ import annotations

import re
from pathlib import Path

from assess.cli import cli
from assess.metrics import SPECS

README = Path(__file__).resolve().parents[2] / "assess" / "README.md"


def test_every_command_is_documented() -> None:
    text = README.read_text()
    for command in cli.commands:
        assert re.search(rf"^assess {command}\b", text, re.M), f"assess {command} has no example in {README}"
        assert f"- **{command}**" in text, f"assess {command} is not described in {README}"


def test_every_metric_is_documented() -> None:
    text = README.read_text()
    for name in SPECS:
        assert re.search(rf"\b{name}\b", text), f"metric {name} is missing from {README}"
