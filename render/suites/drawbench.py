"""DrawBench (Saharia et al. 2022, Imagen): a CSV with the columns Prompts and Category; no ids."""

from __future__ import annotations

from pathlib import Path

from render.suites._base import Entry, Reader
from render.suites._tabular import read_table


def read(path: Path) -> list[Entry]:
    return read_table(path, ",", text=("Prompts", "Prompt"))


READER = Reader("drawbench", (".csv",), "DrawBench CSV: columns Prompts, Category", read)
