"""Issue 63, item 4: the report shows each cell's time split beside its speed-up, says in words the speed-up a
denoiser lever could not give because another stage dominates, and shows "—" for a run recorded without a split."""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

import pytest

from assess.report.write import write_report
from assess.scoring.ingest import score
from assess.statistics.time_split import CellStages, bound_note, cell_stages, denoiser_bound
from tests.assess.conftest import RunFactory, make_cell, shift

ANCHOR_SPLIT = (0.1, 0.4, 0.5)  # the case: the denoiser is 40 % of a sample


def _rows(html: str) -> list[list[str]]:
    """The leaderboard's rows: each row's cells' texts."""
    table = html.split('id="leaderboard-table"', 1)[1].split("</table>", 1)[0]
    return [[html_lib.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)[1:]]


def test_the_report_shows_each_cells_split_and_the_speed_up_another_stage_denies(outputs: RunFactory,
                                                                                  db: Path) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor", latency=1.0, stages=ANCHOR_SPLIT)
    # a cache that halves the denoiser's time: 0.1 + 0.2 + 0.5 = 0.8 of the anchor's latency
    outputs.run(sweep, "1_cache=fbcache", make_cell(cache="fbcache"), overrides=["cache=fbcache"], perturb=shift(1),
                latency=0.8, stages=(0.1 / 0.8, 0.2 / 0.8, 0.5 / 0.8))
    outputs.run(sweep, "2_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(3), latency=0.5)  # no split
    score([sweep], db, metrics=["ssim"])
    html = write_report([sweep], db).read_text()
    assert "<th>time split (text · denoise · VAE)</th>" in html
    texts = [next(c for c in cells if c.startswith("text ") or c == "—") for cells in _rows(html)]
    assert sorted(texts) == sorted(["text 10 % · denoise 40 % · VAE 50 %", "text 12 % · denoise 25 % · VAE 62 %", "—"])
    notes = html.split('id="speed-notes-table"', 1)[1].split("</table>", 1)[0]
    assert ("the denoiser is 40 % of the anchor's sample: this cell's denoising, 2.00x faster, can give at most 1.25x; "
            "no denoiser lever can pass 1.67x here (text encoding 10 %, VAE decode 50 %)") in html_lib.unescape(notes)
    assert notes.count("no denoiser lever") == 1, "said for the capped cell only"


def test_the_bound_is_amdahls_on_the_anchors_split() -> None:
    anchor = CellStages(text_s=0.1, denoise_s=0.4, vae_s=0.5, n=3)
    half = CellStages(text_s=0.1, denoise_s=0.2, vae_s=0.5, n=3)
    p, d, bound, ceiling = denoiser_bound(anchor, half) or (0, 0, 0, 0)
    assert (p, d) == (pytest.approx(0.4), pytest.approx(2.0))
    assert bound == pytest.approx(1.25) and ceiling == pytest.approx(1 / 0.6)
    dominated = CellStages(text_s=0.01, denoise_s=0.98, vae_s=0.01, n=3)  # the denoiser is the sample: nothing to say
    assert bound_note(dominated, CellStages(0.01, 0.49, 0.01, n=3)) is None
    assert bound_note(anchor, anchor) is None, "a denoiser no faster than the anchor's is no lever"
    assert bound_note(None, half) is None and bound_note(anchor, None) is None


def test_a_cells_split_is_the_median_of_its_warm_samples_and_none_without_one() -> None:
    rows = [{"warmup": True, "text_s": 9.0, "denoise_s": 9.0, "vae_s": 9.0},
            *({"warmup": False, "text_s": t, "denoise_s": d, "vae_s": v} for t, d, v in
              [(0.1, 1.0, 0.3), (0.2, 2.0, 0.1), (0.3, 3.0, 0.2)])]
    assert cell_stages(rows) == CellStages(0.2, 2.0, 0.2, n=3)
    assert cell_stages([{"warmup": False, "text_s": None, "denoise_s": None, "vae_s": None}]) is None
