"""GenEval (Ghosh et al. 2023): evaluation_metadata.jsonl, one {"tag", "prompt", "include", ...} per line.

The tag (single_object, two_object, counting, colors, position, color_attr) is the category; no ids.
"""

from __future__ import annotations

import json
from pathlib import Path

from render.suites._base import Entry, PromptError, Reader
from render.suites._fields import label_field, text_field


def read(path: Path) -> list[Entry]:
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise PromptError(f"{where}: expected a GenEval metadata object with \"prompt\" and \"tag\" ({error})") from error
        entries.append(Entry(text=text_field(record, "prompt", where), where=where,
                             category=label_field(record, "tag", where)))
    return entries


def _first_record(path: Path) -> dict[str, object]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    return {}
                return record if isinstance(record, dict) else {}
    return {}


def claims(path: Path) -> bool:
    """A .jsonl file is GenEval metadata when its first record has "prompt" and no "text" (else a manifest)."""
    first = _first_record(path)
    return "prompt" in first and "text" not in first


READER = Reader("geneval", (".jsonl",), 'GenEval metadata JSONL: {"tag", "prompt", ...} per line', read, claims)
