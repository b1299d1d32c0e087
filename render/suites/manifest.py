"""hypergrid's own manifests: JSONL, one {"id", "text"} per line, optionally "category" and "challenge"."""

from __future__ import annotations

import json
from pathlib import Path

from render.suites._base import Entry, PromptError, Reader


def read(path: Path) -> list[Entry]:
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
            entries.append(Entry(text=str(record["text"]), where=where, id=str(record["id"]),
                                 category=record.get("category"), challenge=record.get("challenge")))
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
            raise PromptError(f"{where}: expected a JSON object with \"id\" and \"text\" ({error})") from error
    return entries


READER = Reader("manifest", (".jsonl",), 'JSONL of {"id", "text"[, "category", "challenge"]} (hypergrid\'s own)', read)
