"""A JSON list of prompt strings, `["a red cube", "two dogs", ...]` (what many papers' prompt sets ship as);
no ids, no categories. It takes the .json files whose text starts with `[` (COCO captions JSON is an object)."""

from __future__ import annotations

import json
from pathlib import Path

from render.suites._base import Entry, PromptError, Reader
from render.suites._fields import _got


def read(path: Path) -> list[Entry]:
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise PromptError(f"{path}: expected a JSON list of prompt strings ({error})") from error
    if not isinstance(values, list):
        raise PromptError(f"{path}: expected a JSON list of prompt strings, got {_got(values)}")
    for number, value in enumerate(values, start=1):
        if not isinstance(value, str):
            raise PromptError(f"{path}: item {number}: expected a string (the prompt), got {_got(value)}")
    return [Entry(text=value, where=f"{path}: item {number}") for number, value in enumerate(values, start=1)]


def claims(path: Path) -> bool:
    with path.open(encoding="utf-8-sig", errors="replace") as handle:
        return handle.read(4096).lstrip().startswith("[")


READER = Reader("jsonlist", (".json",), 'a JSON list of prompt strings: ["...", "..."]', read, claims)
