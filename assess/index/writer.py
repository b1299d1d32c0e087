"""The sqlite-utils table the index writes through (`Index.table`), with what the library repeats on every call of a
write cached.

Measured on `benchmarks/index.py` (issue 31 item 5), the library's inserts cost about 55 µs a call and 0.15 µs a
value more than the hand-written statements they replaced; an index ingest makes six calls and some 2,000 values a
cell. Most of it is work whose result does not change between calls:
- it looks the table up (sqlite_master, PRAGMA table_info: four queries an upsert);
- it builds the statement's text anew (every column quoted, every placeholder joined);
- it passes every value through `jsonify_if_needed` (dicts and lists to JSON, dates to text), which returns the
  plain values the index writes (str, int, float, bool, bytes, None) as they are.

`IndexTable` keeps the first two, and hands plain values over as they are. What it writes is always the
library's own statement with the library's own parameters: a statement is cached only after the library built it
for a chunk of that shape and its parameters were the chunk's values, in order; any other chunk (a value that needs
converting, a short row, extracts, conversions, hash ids) goes to the library unchanged.
tests/assess/test_index_table.py checks both against the library, chunk by chunk.

It is also the one edge of the index's rows: every write (the index's own, the climb's records, the timing
sessions) goes through `insert_all`, where every text value but a folder's own path (PATH_COLUMNS) has its
credentials redacted (render.rundir.redact), and nested values (a config, a cell) are redacted before they become
JSON, whichever message, reason or command carried them.
"""

from __future__ import annotations

import inspect
from functools import cached_property
from itertools import chain
from typing import Any, Iterable, Iterator

import sqlite_utils

from render.rundir.redact import redact_data

# The columns that hold a run folder's own paths (keys of the index, named by the renderer, whose override names are
# redacted already: render.compose.schema): written as they are, so that a row still names its folder.
PATH_COLUMNS = frozenset({"path", "sweep", "failed_record", "run_path", "image", "reused_from", "latest_run", "record",
                          "anchor_dir"})

# The exact types jsonify_if_needed returns unchanged (a subclass, such as an Enum, takes the library's path).
PLAIN = frozenset({str, int, float, bool, bytes, type(None)})
# The library's build_insert_queries_and_params as read here (sqlite-utils 4.0 to 4.2): a release that changes it
# gets its own method, uncached.
PARAMETERS = ("extracts", "chunk", "all_columns", "hash_id", "hash_id_columns", "upsert", "pk", "not_null",
              "conversions", "num_records_processed", "replace", "ignore", "list_mode")
KNOWN_SIGNATURE = tuple(inspect.signature(sqlite_utils.db.Table.build_insert_queries_and_params).parameters)[1:] == \
    PARAMETERS


class IndexTable(sqlite_utils.db.Table):
    """A table of the index, for its writes. The migrations made every table, so here it exists, and its columns are
    read once while the schema stays as it was (Index.write compares sqlite's schema_version under the write lock,
    when no other process can change it, and drops its tables if it changed)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._statements: dict[tuple[Any, ...], str] = {}

    def exists(self) -> bool:
        return True

    @cached_property
    def columns(self) -> list[sqlite_utils.db.Column]:
        return super().columns

    @cached_property
    def columns_dict(self) -> dict[str, Any]:
        return super().columns_dict

    def insert_all(self, records: Iterable[Any], *args: Any, **kwargs: Any) -> Any:
        """The library's insert_all (and upsert_all, which calls it) of the records, redacted (module docstring)."""
        return super().insert_all(redacted(records), *args, **kwargs)

    def update(self, pk_values: Any, updates: dict[str, Any] | None = None, *args: Any, **kwargs: Any) -> Any:
        """The library's update of one row, its new values redacted (module docstring)."""
        return super().update(pk_values, next(redacted([updates or {}])), *args, **kwargs)

    def build_insert_queries_and_params(self, *args: Any, **kwargs: Any) -> list[tuple[str, list[Any]]]:
        """The library's (sql, parameters) for a chunk; for a list-mode chunk of plain values, its statement cached
        by shape and the values as they are (see the module's docstring)."""
        library = super().build_insert_queries_and_params
        if not KNOWN_SIGNATURE or kwargs or len(args) != len(PARAMETERS):
            return library(*args, **kwargs)  # a release that builds differently: its own build, unchanged
        (extracts, chunk, all_columns, hash_id, hash_id_columns, upsert, pk, not_null, conversions, _,
         replace, ignore, list_mode) = args
        if not list_mode or extracts or hash_id or hash_id_columns or conversions or not_null:
            return library(*args)
        if set(map(len, chunk)) != {len(all_columns)} or not PLAIN.issuperset(map(type, chain.from_iterable(chunk))):
            return library(*args)
        params = list(chain.from_iterable(chunk))
        shape = (tuple(all_columns), len(chunk), bool(upsert), pk if isinstance(pk, str | None) else tuple(pk),
                 bool(replace), bool(ignore))
        sql = self._statements.get(shape)
        if sql is not None:
            return [(sql, params)]
        built = library(*args)
        if len(built) == 1 and built[0][1] == params:  # one statement of the chunk's values, in order: cacheable
            self._statements[shape] = built[0][0]
        return built


PLAIN_UNREDACTED = (int, float, bool, bytes, type(None))  # what holds no text: passed as it is


def redacted(records: Iterable[Any]) -> Iterator[Any]:
    """sqlite-utils' records (dicts, or in list mode the column names and then lists of values) with every value
    but PATH_COLUMNS' redacted; a plain value without credentials stays the same object."""
    rows = iter(records)
    first = next(rows, None)
    if first is None:
        return
    if isinstance(first, (list, tuple)):  # list mode: the column names, then value lists in their order
        keep = [c in PATH_COLUMNS for c in first]
        yield first
        for row in rows:
            yield [v if (i < len(keep) and keep[i]) or isinstance(v, PLAIN_UNREDACTED) else redact_data(v)
                   for i, v in enumerate(row)]
        return
    yield from ({c: v if c in PATH_COLUMNS or isinstance(v, PLAIN_UNREDACTED) else redact_data(v)
                 for c, v in record.items()} for record in chain([first], rows))

