"""assess.statistics.floor.measure called directly on an index (fast; tests/assess/test_floor.py renders the tiny model)."""

from __future__ import annotations

from pathlib import Path

from assess.index.database import Index
from assess.scoring.ingest import score
from assess.statistics.floor import measure
from tests.assess.conftest import ANCHOR_KEY


def test_the_floor_is_measured_on_the_lossless_sibling_for_each_known_metric_and_an_unknown_metric_has_none(
        sweep_with_anchor: Path, db: Path) -> None:
    score([sweep_with_anchor], db, metrics=["ssim"])  # attention=sdpa: the anchor's pixels, a lossless sibling
    with Index.open(db) as index:
        floors = measure(index, ANCHOR_KEY, ["ssim", "no-such-metric"])
        assert measure(index, "no-such-anchor", ["ssim"]) == {}
    assert list(floors) == ["ssim"]
    floor = floors["ssim"]
    assert (floor.value, floor.n, floor.sibling, floor.anchor_cell_key) == (0.0, 4, "attention=sdpa", ANCHOR_KEY)
