"""COCO captions (captions_train2017.json, captions_val2014.json, ...): {"annotations": [{"id", "image_id",
"caption"}, ...]}. The annotation id is the prompt's id; COCO has no categories for captions."""

from __future__ import annotations

import json
from pathlib import Path

from render.suites._base import Entry, PromptError, Reader
from render.suites._fields import id_field, text_field


def read(path: Path) -> list[Entry]:
    try:
        annotations = json.loads(path.read_text(encoding="utf-8"))["annotations"]
        entries = []
        for number, a in enumerate(annotations, start=1):
            where = f"{path}: annotation {number}" + (f" (id {a.get('id')!r})" if isinstance(a, dict) else "")
            text = text_field(a, "caption", where)
            entries.append(Entry(text=text, where=where, id=f"coco-{int(id_field(a, 'id', where))}"))
        return entries
    except PromptError:
        raise
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise PromptError(f"{path}: expected COCO captions JSON, {{\"annotations\": [{{\"id\", \"caption\"}}, ...]}} "
                          f"({type(error).__name__}: {error})") from error


READER = Reader("coco", (".json",), 'COCO captions JSON: {"annotations": [{"id", "caption"}]}', read)
