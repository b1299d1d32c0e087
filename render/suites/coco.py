"""COCO captions (captions_train2017.json, captions_val2014.json, ...): {"annotations": [{"id", "image_id",
"caption"}, ...]}. The annotation id is the prompt's id; COCO has no categories for captions."""

from __future__ import annotations

import json
from pathlib import Path

from render.suites._base import Entry, PromptError, Reader


def read(path: Path) -> list[Entry]:
    try:
        annotations = json.loads(path.read_text(encoding="utf-8"))["annotations"]
        return [Entry(text=str(a["caption"]), where=f"{path}: annotation {a['id']}", id=f"coco-{int(a['id'])}")
                for a in annotations]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise PromptError(f"{path}: expected COCO captions JSON, {{\"annotations\": [{{\"id\", \"caption\"}}, ...]}} "
                          f"({type(error).__name__}: {error})") from error


READER = Reader("coco", (".json",), 'COCO captions JSON: {"annotations": [{"id", "caption"}]}', read)
