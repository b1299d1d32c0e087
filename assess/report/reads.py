"""The index as a report reads it: every cell's rows read at once, not once per cell and view.

A report of 5,000 cells asked the index about 17 questions per cell (its samples for the scope, again for its
speed-up, its contact-sheet column, its speed notes; its scores twice; its runs for its width, its drift, its
configuration): 86,000 queries, 5 s. `ReportIndex` reads the samples, scores, set scores, runs, `cells` rows and
parity rows of the report's cells in one query per table (a JSON list of the cell keys joined to the table's index:
no table is scanned), and answers Index's per-cell reads (`samples_of`, `scores_of`, ...) from them, in the same
order. A cell it was not built with (a parallel cell's width-1 twin) is read from the index as before; every
other read goes to the index itself.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from assess.index.database import Index, in_split

Rows = list[dict[str, Any]]


class ReportIndex:
    """An Index whose per-cell reads of `cell_keys` come from rows read once (module doc)."""

    def __init__(self, index: Index, cell_keys: Iterable[str]) -> None:
        self.index = index
        self.cell_keys = frozenset(cell_keys)
        keys = json.dumps(sorted(self.cell_keys))
        self._cell_samples: dict[str, Rows] = defaultdict(list)
        for row in self._read("samples", keys, "prompt_sha, seed"):
            self._cell_samples[row["cell_key"]].append(row)
        self._samples: dict[tuple[str, str], Rows] = {}  # (cell, split) -> its samples by membership, once asked
        self._scores = self._grouped(self._read("scores", keys, "prompt_sha, seed, metric, metric_version"),
                                     "cell_key")
        self._set_scores = self._grouped(self._read("set_scores", keys, "split, metric, metric_version"),
                                         "cell_key", "split")
        self._runs = self._grouped(self._read("runs", keys, "split, rowid"), "cell_key")
        self._cells = {(r["cell_key"], r["split"]): r for r in self._read("cells", keys, "split")}
        self._parity = self._grouped(self._read("parity", keys, "prompt_sha, seed"), "cell_key")
        timed = {r["cell_key"] for r in index.query(
            "SELECT DISTINCT t.cell_key FROM json_each(?) j JOIN timing_cells t ON t.cell_key = j.value", (keys,))}
        self.untimed = self.cell_keys - timed  # cells no side-by-side session timed (assess.statistics.side_by_side)
        self._calls: dict[str, list[float]] = {}  # each timed cell's calls in its latest complete session
        for row in index.query("SELECT c.cell_key, c.latencies FROM json_each(?) j JOIN timing_cells c "
                               "ON c.cell_key = j.value JOIN timing_sessions s USING (session) WHERE s.complete = 1 "
                               "ORDER BY c.cell_key, s.finished_at DESC", (keys,)):
            self._calls.setdefault(row["cell_key"], [float(x) for x in json.loads(row["latencies"])])

    def _read(self, table: str, keys: str, order: str) -> Rows:
        """Every row of `table` of the cell keys (a JSON list), by cell key and then `order` (the per-cell reads')."""
        cursor = self.index.conn.cursor()
        cursor.row_factory = None  # plain tuples, made dicts below: twice as fast as dicts of sqlite3.Row
        cursor.execute(f"SELECT t.* FROM json_each(?) j JOIN {table} t ON t.cell_key = j.value "
                       f"ORDER BY t.cell_key, {', '.join('t.' + c.strip() for c in order.split(','))}", (keys,))
        columns = [d[0] for d in cursor.description]
        return [dict(zip(columns, row)) for row in cursor]

    @staticmethod
    def _grouped(rows: Rows, *by: str) -> dict[Any, Rows]:
        out: dict[Any, Rows] = defaultdict(list)
        for row in rows:
            out[tuple(row[b] for b in by) if len(by) > 1 else row[by[0]]].append(row)
        return out

    def __getattr__(self, name: str) -> Any:  # every other read (and `path`, `conn`): the index's own
        return getattr(self.index, name)

    def samples_of(self, cell_key: str, split: str) -> Rows:
        if cell_key not in self.cell_keys:
            return self.index.samples_of(cell_key, split)
        if (cell_key, split) not in self._samples:
            self._samples[(cell_key, split)] = in_split(self._cell_samples.get(cell_key, []),
                                                        self._runs.get(cell_key, []), split)
        return self._samples[(cell_key, split)]

    def cell_samples(self, cell_key: str) -> dict[tuple[str, int], Any]:
        if cell_key not in self.cell_keys:
            return self.index.cell_samples(cell_key)
        return {(r["prompt_sha"], r["seed"]): r for r in self._cell_samples.get(cell_key, [])}

    def scores_of(self, cell_key: str) -> Rows:
        return self._scores.get(cell_key, []) if cell_key in self.cell_keys else self.index.scores_of(cell_key)

    def set_scores_of(self, cell_key: str, split: str) -> Rows:
        if cell_key not in self.cell_keys:
            return self.index.set_scores_of(cell_key, split)
        return self._set_scores.get((cell_key, split), [])

    def session_calls(self, cell_key: str) -> list[float]:
        if cell_key not in self.cell_keys:
            return self.index.session_calls(cell_key)
        return self._calls.get(cell_key, [])

    def runs_of(self, cell_key: str) -> Rows:
        return self._runs.get(cell_key, []) if cell_key in self.cell_keys else self.index.runs_of(cell_key)

    def cell_row(self, cell_key: str, split: str) -> dict[str, Any] | None:
        return self._cells.get((cell_key, split)) if cell_key in self.cell_keys else self.index.cell_row(cell_key, split)

    def parity(self, cell_key: str) -> Rows:
        if cell_key not in self.cell_keys:
            return [dict(row) for row in self.index.parity(cell_key)]
        return self._parity.get(cell_key, [])
