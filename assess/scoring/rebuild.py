"""`assess score --rebuild`: the index made anew from the run directories, its source of truth.

The new index is scored into a temporary file beside the old one and renamed over it only when done, so
a rebuild that is interrupted leaves the old index as it was. The old one may be damaged or foreign:
its counts are then reported as unreadable, never trusted.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from assess.index.database import Index, default_index_path
from assess.scoring.ingest import score
from assess.scoring.tally import ScoreSummary

Log = Callable[[str], None]


@dataclass(frozen=True)
class Counts:
    runs: int
    samples: int

    def text(self) -> str:
        return f"{self.runs} run(s), {self.samples} sample(s)"


@dataclass(frozen=True)
class Rebuilt:
    path: Path
    before: Counts | str  # the old index's counts, or why they could not be read ("no index", the sqlite error)
    after: Counts | None  # None: no run could be indexed, and the old index was left as it was
    summary: ScoreSummary

    def line(self) -> str:
        before = self.before.text() if isinstance(self.before, Counts) else self.before
        if self.after is None:
            return f"rebuilt nothing: no run could be indexed; {self.path} left as it was ({before})"
        return f"rebuilt {self.path}: before {before}; after {self.after.text()}"


def counts(path: Path) -> Counts | str:
    """Runs and samples an index holds, or why it cannot say."""
    if not path.exists():
        return "no index"
    try:
        with Index.open(path, create=False) as index:
            row = index.query("SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM samples) AS samples")[0]
    except Exception as exc:  # noqa: BLE001 - whatever is wrong with the old index, the rebuild replaces it
        return f"unreadable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    return Counts(row["runs"], row["samples"])


def rebuild_index(paths: list[Path | str], index_path: Path | str | None = None, metrics: list[str] | None = None,
                  clip_model: str | None = None, log: Log | None = None,
                  metric_models: dict[str, str] | None = None) -> Rebuilt:
    """Score every run `paths` know into a new index, then put it in the old one's place."""
    path = Path(index_path) if index_path is not None else default_index_path()
    before = counts(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.rebuild-{os.getpid()}")
    _remove(staging)
    try:
        summary = score(paths, staging, metrics=metrics, clip_model=clip_model, log=log, metric_models=metric_models)
        if not summary.runs:  # an empty index in the old one's place would lose it for nothing
            return Rebuilt(path, before, None, summary)
        after = counts(staging)
        assert isinstance(after, Counts), after
        _checkpoint(staging)
        for suffix in ("-wal", "-shm"):  # the old database's journal must not be applied to the new one
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        os.replace(staging, path)
    finally:
        _remove(staging)
    return Rebuilt(path, before, after, summary)


def _checkpoint(path: Path) -> None:
    """Fold the WAL into the database file, so the one file renamed into place holds everything."""
    conn = sqlite3.connect(str(path))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode = DELETE")
    finally:
        conn.close()


def _remove(path: Path) -> None:
    for name in (str(path), f"{path}-wal", f"{path}-shm", f"{path}-journal"):
        Path(name).unlink(missing_ok=True)
