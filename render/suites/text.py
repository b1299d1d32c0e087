"""Plain text: one prompt a line (blank lines skipped); no ids, no categories."""

from __future__ import annotations

from pathlib import Path

from render.suites._base import Entry, Reader


def read(path: Path) -> list[Entry]:
    return [Entry(text=line, where=f"{path}:{number}")
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1) if line.strip()]


READER = Reader("text", (".txt",), "plain text: one prompt a line", read)
