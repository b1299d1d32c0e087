"""A sample counts in every prompt set that holds its text (membership, not the split of the run that rendered it).

The README's dev sweep after its first sweep: six dev prompts share their text with smoke prompts, so skip-if-done
reuses six samples rendered under smoke. The dev answer said "on 54 prompts", the anchor's row read 54/60, and the
demo's top rung was judged on 33 of its 36 prompts; the climb saw a rung whose every sample was done as unrendered
and named the same command again, generation after generation."""

from __future__ import annotations

from pathlib import Path

import pytest

from assess.index.database import Index
from assess.scoring.ingest import score
from assess.statistics.compare import compare_cell
from tests.assess.conftest import ANCHOR_KEY, PROMPTS, RunFactory, make_cell, shift

SHARED = {"dev-000": PROMPTS["smoke-000"], "dev-001": "a purple hexagon", "dev-002": PROMPTS["smoke-002"]}


@pytest.mark.slow  # scores 28 samples (about 30 s on a loaded machine)
def test_a_sample_rendered_under_smoke_counts_in_dev_when_dev_holds_its_text(outputs: RunFactory, db: Path) -> None:
    first, later = outputs.sweep("2026-11-30/10-04-12-aaaa"), outputs.sweep("2026-11-30/11-04-12-bbbb")
    cell = make_cell(steps=8)
    outputs.stored_anchor(prompts=PROMPTS, split="smoke")
    outputs.run(first, "0_steps=8", cell, overrides=["steps=8"], perturb=shift(4), split="smoke")
    # the dev sweep: its runs ask for three texts, two of them the smoke run's (rendered there, reused here)
    outputs.stored_anchor("2026-11-30_11-04-12-cd34", prompts=SHARED, split="dev", started_at="2026-11-30T11:04:12+00:00")
    outputs.run(later, "0_steps=8", cell, overrides=["steps=8"], perturb=shift(4), split="dev", prompts=SHARED,
                started_at="2026-11-30T11:04:12+00:00")
    score([outputs.root], db, metrics=["psnr", "ssim"])
    with Index.open(db) as index:
        key = index.query("SELECT cell_key FROM runs WHERE is_anchor = 0 LIMIT 1")[0]["cell_key"]
        for cell_key in (key, ANCHOR_KEY):
            assert len(index.samples_of(cell_key, "dev")) == 3 * 2, "every dev text, both seeds, whoever rendered it"
            assert len(index.samples_of(cell_key, "smoke")) == 4 * 2, "the smoke set keeps its own"
            summary = {r["split"]: r for r in index.query("SELECT * FROM cell_summary WHERE cell_key = ?", (cell_key,))}
            assert (summary["dev"]["n_samples"], summary["dev"]["n_expected"]) == (6, 6), summary["dev"]
            assert summary["smoke"]["n_samples"] == 8
        compared = compare_cell(index, key, ANCHOR_KEY, "dev")
        assert compared.metrics["ssim"].n == 3, "judged on the dev set's three prompts, not the one it rendered itself"
