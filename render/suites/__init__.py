"""Prompt suites: one reader per format (one module each, one shape: `_base.Reader`), the hub-dataset
fetch (`hub`), and the project's own suite and its split rule (`project`).

`read_suite(path, format)` turns any supported file into prompts with stable ids; `format="auto"` picks
the reader by the file's suffix (a .jsonl file is GenEval metadata when its first line has "prompt"
and no "text").
"""

from __future__ import annotations

import json
from pathlib import Path

from render.suites import coco, drawbench, geneval, manifest, parti, text
from render.suites._base import Entry, Prompt, PromptError, Reader, content_id, to_prompts

READERS: dict[str, Reader] = {r.format: r for r in (manifest.READER, drawbench.READER, parti.READER,
                                                    geneval.READER, coco.READER, text.READER)}
FORMATS = ("auto", *READERS)


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


def detect_format(path: Path) -> str:
    """The reader for a file, from its suffix (and, for .jsonl, its first record)."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        first = _first_record(path)
        return geneval.READER.format if "prompt" in first and "text" not in first else manifest.READER.format
    for reader in READERS.values():
        if suffix in reader.suffixes:
            return reader.format
    raise PromptError(f"{path}: cannot tell the format from the suffix {suffix or '(none)'!r}; set prompts.format to "
                      "one of: " + "; ".join(f"{r.format} ({r.description})" for r in READERS.values()))


def read_suite(path: Path, format: str = "auto") -> list[Prompt]:
    """The prompts of a suite file, in file order, with stable ids (content-derived where the file has none)."""
    if format not in FORMATS:
        raise PromptError(f"prompts.format={format!r}: valid formats are {', '.join(FORMATS)}")
    chosen = detect_format(path) if format == "auto" else format
    try:
        entries = READERS[chosen].read(path)
    except UnicodeDecodeError as error:
        raise PromptError(f"{path}: not UTF-8 text ({error})") from None
    return to_prompts(entries, path, prefix=chosen)


__all__ = ["FORMATS", "READERS", "Entry", "Prompt", "PromptError", "Reader", "content_id", "detect_format",
           "read_suite"]
