"""Issue 58, item 7: every cell shown, one name everywhere. Two cells that did the same work (a cache that never
engaged renders the uncached cell's images byte for byte) are both listed, each by its own overrides, the later one
saying "same work as ..." (one row named by whichever ranked first, flipping with --band, before)."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest

from assess.report.write import write_report
from assess.scoring.ingest import score
from tests.assess.conftest import RunFactory, make_cell, shift


@pytest.fixture
def twins(outputs: RunFactory, db: Path) -> Path:
    """steps=4 with fbcache that never engaged (the same images as steps=4 cache=none), and steps=8, scored."""
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor", overrides=["steps=28", "cache=none"], latency=0.2)
    outputs.run(sweep, "1_cache=none,steps=4", make_cell(steps=4), overrides=["steps=4", "cache=none"],
                perturb=shift(2), latency=0.05)
    outputs.run(sweep, "2_cache=fbcache,steps=4", make_cell(steps=4, cache="fbcache"),
                overrides=["steps=4", "cache=fbcache"], perturb=shift(2), latency=0.06)
    outputs.run(sweep, "3_cache=none,steps=8", make_cell(steps=8), overrides=["steps=8", "cache=none"],
                perturb=shift(1), latency=0.1)
    score([sweep], db, metrics=["psnr"])
    return sweep


def verdict_labels(html: str) -> list[str]:
    table = html[html.index('<table id="verdict-table">'):]
    return [" ".join(re.sub(r"<[^>]+>", "", c).split()) for c in re.findall(r'<td class="vcell">(.*?)</td>', table, re.S)]


@pytest.mark.slow
def test_cells_that_did_the_same_work_are_both_listed_each_by_its_overrides(twins: Path, db: Path,
                                                                              tmp_path: Path) -> None:
    pages = {band: unescape(write_report([twins], db, out=tmp_path / f"report-{band}", band=band).read_text())
             for band in (None, 50.0)}
    for band, html in pages.items():
        labels = verdict_labels(html)
        assert labels == ["★ anchor (config)", "steps=4 cache=none",
                          "steps=4 cache=fbcache (same work as steps=4 cache=none)", "steps=8 cache=none"], (band, labels)
        assert "steps=4 cache=fbcache (same work as steps=4 cache=none: byte-identical images, one result)" in html, \
            "the leaderboard lists it too, under its own overrides"
