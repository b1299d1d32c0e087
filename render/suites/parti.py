"""PartiPrompts (Yu et al. 2022, Parti): a TSV with the columns Prompt, Category, Challenge (and Note); no ids."""

from __future__ import annotations

from pathlib import Path

from render.suites._base import Entry, Reader
from render.suites._tabular import read_table


def read(path: Path) -> list[Entry]:
    return read_table(path, "\t", text=("Prompt", "Prompts"))


READER = Reader("parti", (".tsv",), "PartiPrompts TSV: columns Prompt, Category, Challenge", read)
