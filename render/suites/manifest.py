"""hypergrid's own manifests: JSONL, one {"id", "text"} per line, optionally "category" and "challenge"."""

from __future__ import annotations

import json
from pathlib import Path

from render.suites._base import Entry, PromptError, Reader
from render.suites._fields import id_field, label_field, text_field


def read(path: Path) -> list[Entry]:
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise PromptError(f"{where}: expected a JSON object with \"id\" and \"text\" ({error})") from error
        text = text_field(record, "text", where)
        entries.append(Entry(text=text, where=where, id=id_field(record, "id", where),
                             category=label_field(record, "category", where),
                             challenge=label_field(record, "challenge", where)))
    return entries


READER = Reader("manifest", (".jsonl",), 'JSONL of {"id", "text"[, "category", "challenge"]} (hypergrid\'s own)', read)
