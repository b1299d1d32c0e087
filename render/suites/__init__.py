"""Prompt suites: one reader per format (one module each, exporting `READER`, one shape: `_base.Reader`),
the hub-dataset fetch (`hub`), and the project's own suite and its split rule (`project`).

Adding a reader is adding its module here: the `READERS` registry (render.compose.registry) finds every module of
this package that exports `READER`, and `prompts.format` takes its name.

`read_suite(path, format)` turns any supported file into prompts with stable ids; `format="auto"` picks
the reader by the file's suffix (where several readers take a suffix, as .jsonl's manifest and GenEval
metadata, the one whose `claims` accepts the file; else the one without `claims`).
"""

from __future__ import annotations

from pathlib import Path

from render.compose.registry import Registry
from render.suites._base import Entry, Prompt, PromptError, Reader, content_id, to_prompts

READERS: Registry[Reader] = Registry("prompt reader", "prompts.format", lambda r: r.format, package=__name__,
                                     attribute="READER", error=PromptError)
AUTO = "auto"


def formats() -> list[str]:
    """The prompts.format values: auto, then every reader's name."""
    return [AUTO, *READERS.names()]


def detect_format(path: Path) -> str:
    """The reader for a file, from its suffix (and, where several readers take the suffix, their `claims`)."""
    suffix = path.suffix.lower()
    candidates = [READERS[name] for name in READERS.names() if suffix in READERS[name].suffixes]
    for reader in sorted(candidates, key=lambda r: r.claims is None):  # stable: those with `claims` first, by name
        if reader.claims is None or reader.claims(path):
            return reader.format
    raise PromptError(f"{path}: cannot tell the format from the suffix {suffix or '(none)'!r}; set prompts.format to "
                      "one of: " + "; ".join(f"{r.format} ({r.description})" for r in map(READERS.__getitem__, READERS.names())))


def read_suite(path: Path, format: str = AUTO) -> list[Prompt]:
    """The prompts of a suite file, in file order, with stable ids (content-derived where the file has none)."""
    if format != AUTO and format not in READERS:
        raise PromptError(f"prompts.format={format!r}: valid formats are {', '.join(formats())}")
    chosen = detect_format(path) if format == AUTO else format
    try:
        entries = READERS[chosen].read(path)
    except UnicodeDecodeError as error:
        raise PromptError(f"{path}: not UTF-8 text ({error})") from None
    return to_prompts(entries, path, prefix=chosen)


__all__ = ["AUTO", "READERS", "Entry", "Prompt", "PromptError", "Reader", "content_id", "detect_format", "formats",
           "read_suite"]
