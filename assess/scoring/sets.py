"""Set metrics (CMMD): each cell's images against its anchor's over a split, in one value per (cell, split).

A cell's sample is paired with the anchor's sample of the same prompt text (its identity, samples.prompt_sha) and seed;
flagged samples (missing, unreadable or not the recorded file) are left out. The value is kept with its
sample size and a digest of the pairs, so a set that gained samples is scored again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assess.index.database import Index
from assess.metrics import SetMetric
from render.rundir.untrusted import contained

from assess.scoring.tally import ScoreSummary

if TYPE_CHECKING:
    import numpy as np

ReadImage = Callable[[Path], "np.ndarray"]


def _usable(rows: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(r["prompt_sha"], r["seed"]): r for r in rows if not r["problem"]}


def paired_samples(index: Index, cell_key: str, anchor_key: str, split: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(cell sample, anchor sample) rows of the split, paired by prompt text identity and seed, in a stable order."""
    columns = "prompt_sha, prompt_id, seed, prompt, run_path, image, problem"
    cell = _usable(index.samples_of(cell_key, split))  # by membership of their text (assess.index.database.in_split)
    anchor = _usable(index.query(f"SELECT {columns} FROM samples WHERE cell_key = ?", (anchor_key,)))
    return [(cell[key], anchor[key]) for key in sorted(cell) if key in anchor]


def pairs_digest(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> str:
    lines = [f"{c['prompt_id']}|{c['seed']}|{c['run_path']}/{c['image']}|{a['run_path']}/{a['image']}" for c, a in pairs]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def _current(existing: dict[str, Any] | None, metric: SetMetric, digest: str) -> bool:
    return (existing is not None and existing["value"] is not None and existing["metric_version"] == metric.spec.version
            and existing["config"] == metric.config and existing["pairs"] == digest)


def _images(pairs: list[tuple[dict[str, Any], dict[str, Any]]], read: ReadImage) -> tuple[list[Any], list[Any], int]:
    """The readable pairs' images, and how many pairs were left out as unreadable."""
    images, references, unreadable = [], [], 0
    for cell, anchor in pairs:
        try:
            image = read(contained(cell["run_path"], cell["image"], "image"))
            reference = read(contained(anchor["run_path"], anchor["image"], "anchor image"))
        except OSError:
            unreadable += 1
            continue
        images.append(image)
        references.append(reference)
    return images, references, unreadable


def score_sets(index: Index, cells: Iterable[tuple[str, str, str]], metrics: list[SetMetric], summary: ScoreSummary,
               read: ReadImage, force: bool = False, touched: Any = None, stale: Iterable[str] = ()) -> None:
    """Score every set metric of every (cell key, split, anchor cell key) of the runs scored (not the anchors'),
    against the cell's anchor; each cell written is refreshed then, or by `touched` (assess.scoring.ingest.Touched)
    once the scoring ends. The `stale` cells are scored again whatever their scores (their anchor's images were
    written since: the pairs' paths are the same, their pixels not)."""
    stale = set(stale)
    for cell_key, split, anchor_key in sorted(set(cells)):
        pairs = paired_samples(index, cell_key, anchor_key, split)
        digest = pairs_digest(pairs)
        loaded: tuple[list[Any], list[Any], int] | None = None
        for metric in metrics:
            if not force and cell_key not in stale and _current(index.set_score(cell_key, split, metric.spec.name),
                                                                 metric, digest):
                summary.current += 1
                continue
            loaded = loaded or _images(pairs, read)
            images, references, unreadable = loaded
            outcome = metric.score(images, references)
            detail = "; ".join(d for d in (outcome.detail, f"{unreadable} unreadable pair(s) left out" if unreadable else "") if d)
            with index.write() as conn:
                index.write_set_score(conn, {
                    "cell_key": cell_key, "split": split, "metric": metric.spec.name, "metric_version": metric.spec.version,
                    "value": outcome.value, "unavailable_reason": outcome.unavailable_reason,
                    "direction": metric.spec.direction, "n": len(images), "config": metric.config,
                    "reference_cell_key": anchor_key, "pairs": digest, "detail": detail or None})
                if touched is None:
                    index.refresh_cell(conn, cell_key)
            if touched is not None:
                touched.touch(cell_key)
            summary.written += 1
            if outcome.unavailable_reason is not None:
                summary.unavailable[(metric.spec.name, outcome.unavailable_reason)] += 1
