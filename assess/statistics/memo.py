"""Bootstrap intervals remembered from one report to the next, by the content of what they were computed from.

A report of 5,000 cells computes two bootstraps of 2,000 resamples a cell (the reference metric's BCa interval and
the speed-up's): most of its statistics time, spent again on every report although a sweep's finished cells do not
change. Each interval is a pure function of its inputs (the values, the seed) and of the code that computes it, so
it is kept under a digest of both, in a small SQLite file beside the index (`<index>.intervals.db`): a report
recomputes only the intervals of cells whose samples changed. The code's digest covers the modules that compute
intervals and numpy's version (its arithmetic decides the last bits), so a changed method is never answered from
an old one's results. Outside `remembering()` (the climb, tests, a library caller) every interval is computed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

Interval = tuple[float | None, float | None]


@cache
def code_digest() -> str:
    """The interval code's identity: its modules' source (read, not imported: they import this one) and numpy's
    version."""
    import numpy as np

    here = Path(__file__).parent
    digest = hashlib.sha256(np.__version__.encode())
    for source in (here / "compare.py", here / "resample.py", here.parent / "metrics" / "speed.py"):
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def interval(stored: object) -> Interval | None:
    """A memo row's value read back as an interval (two numbers, either may be None), or None when the row holds
    anything else (a number, a list of three, text, bytes that are not JSON, NULL): a damaged row, computed again."""
    try:
        value = json.loads(stored) if isinstance(stored, (str, bytes)) else None
    except ValueError:  # not JSON, or not UTF-8
        return None
    if not isinstance(value, list) or len(value) != 2:
        return None
    if not all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in value):
        return None
    return (value[0], value[1])


class IntervalMemo:
    """The intervals of one file, read at once; what a report adds is written when it ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.new: dict[str, Interval] = {}
        self.known: dict[str, Interval] = {}
        if path.is_file():
            try:
                with sqlite3.connect(path) as db:
                    rows = db.execute("SELECT key, value FROM intervals").fetchall()
            except sqlite3.Error as error:  # a damaged memo is only a slower report
                log.warning("%s could not be read (%s): every interval is computed", path, error)
                rows = []
            self.known = {k: v for k, v in ((k, interval(v)) for k, v in rows) if isinstance(k, str) and v is not None}
            if len(self.known) < len(rows):  # each damaged row is computed again, and replaced when saved
                log.warning("%s: %d row(s) hold no interval: they are computed again", path, len(rows) - len(self.known))

    def get(self, kind: str, seed: int, arrays: tuple[Any, ...], compute: Callable[[], Interval]) -> Interval:
        import numpy as np

        digest = hashlib.sha256(f"{kind}\0{seed}\0{code_digest()}".encode())
        for array in arrays:
            data = np.ascontiguousarray(array, dtype=float)
            digest.update(str(data.shape).encode())
            digest.update(data.tobytes())
        key = digest.hexdigest()
        if key in self.known:
            return self.known[key]
        value = self.known[key] = self.new[key] = compute()
        return value

    def save(self) -> None:
        if not self.new or not os.access(self.path.parent, os.W_OK | os.X_OK):
            return  # nothing new, or an index folder this user cannot write (a report of another's index)
        from render.rundir.files import create_empty

        try:
            create_empty(self.path)  # the umask's mode, as the index's (sqlite alone: 0644)
            with sqlite3.connect(self.path, timeout=30) as db:
                db.execute("CREATE TABLE IF NOT EXISTS intervals (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                db.executemany("INSERT OR REPLACE INTO intervals VALUES (?, ?)",  # a damaged row healed
                               [(k, json.dumps(list(v))) for k, v in self.new.items()])
        except (sqlite3.Error, OSError) as error:  # a read-only folder: the next report computes them again
            log.warning("%s could not be written (%s): the next report computes these intervals again", self.path, error)
        self.new = {}


_ACTIVE: ContextVar[IntervalMemo | None] = ContextVar("interval_memo", default=None)


def memo_path(index_path: Path) -> Path:
    return index_path.with_name(index_path.name + ".intervals.db")


@contextmanager
def remembering(index_path: Path) -> Iterator[IntervalMemo]:
    """Inside, intervals are answered from (and added to) the memo beside the index at `index_path`."""
    memo = IntervalMemo(memo_path(index_path))
    token = _ACTIVE.set(memo)
    try:
        yield memo
    finally:
        _ACTIVE.reset(token)
        memo.save()


def remembered(kind: str, seed: int, arrays: tuple[Any, ...], compute: Callable[[], Interval]) -> Interval:
    """`compute()`, or the interval the active memo holds for these inputs (computed when none is active)."""
    memo = _ACTIVE.get()
    return compute() if memo is None else memo.get(kind, seed, arrays, compute)
