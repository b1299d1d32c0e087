"""Reading a delimited file by its header, for the CSV and TSV suites."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from render.suites._base import Entry, PromptError


def _column(header: list[str], names: tuple[str, ...]) -> str | None:
    by_name = {name.strip().casefold(): name for name in header}
    return next((by_name[n.casefold()] for n in names if n.casefold() in by_name), None)


def read_table(path: Path, delimiter: str, text: tuple[str, ...], category: tuple[str, ...] = ("Category",),
               challenge: tuple[str, ...] = ("Challenge",)) -> list[Entry]:
    """One entry per data row. The text column (any of `text`'s names, case-insensitive) must exist;
    the category and challenge columns are read where the header has them."""
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle, delimiter=delimiter)
        header = list(reader.fieldnames or [])
        text_column = _column(header, text)
        if text_column is None:
            raise PromptError(f"{path}: no {' or '.join(repr(n) for n in text)} column "
                              f"(its header has {', '.join(repr(n) for n in header) or 'nothing'})")
        category_column, challenge_column = _column(header, category), _column(header, challenge)
        return [Entry(text=row.get(text_column) or "", where=f"{path}:{reader.line_num}",
                      category=row.get(category_column) if category_column else None,
                      challenge=row.get(challenge_column) if challenge_column else None)
                for row in _whole_rows(reader, path, header)]


def _whole_rows(reader: csv.DictReader, path: Path, header: list[str]) -> Iterator[dict[str, str]]:
    """The rows, each with exactly the header's number of fields: one more (an extra tab or comma) or one less
    would shift the columns, so it is an error naming the line."""
    for row in reader:
        fields = len(header) + len(row.get(None) or ()) - sum(1 for k in header if row.get(k) is None)
        if fields != len(header):
            raise PromptError(f"{path}:{reader.line_num}: {fields} field(s), the header has {len(header)} "
                              f"({', '.join(map(repr, header))}); quote a field that holds the delimiter")
        yield row
