"""The shipped shapes model's quality and its speed/quality trade-off, measured with the checker (slow).

60 dev samples (every dev prompt, seed 0) per cell, rendered through the runner's code: about a minute on one core in
all (docs/shapes.md's table takes 5 seeds; 300 samples a cell cost the slow tier 5 minutes, two seeds 150 s). The
renders are deterministic, so the paired intervals below are the same numbers on every run, not a coin toss.
"""

from __future__ import annotations

import numpy as np
import pytest

from assess.metrics.tradeoff import compose_job, load_shipped, paired_difference, render_job, verdicts

pytestmark = pytest.mark.slow

DEV = ["prompts=dev", "seed=0"]
# The most aggressive cache setting of the trade-off table (docs/shapes.md), at the anchor's steps:
# first-block cache skipping the remaining blocks while the first block's residual moved by under 60%.
AGGRESSIVE_CACHE = ["cache=fbcache", "cache.threshold=0.6"]


@pytest.fixture(scope="module")
def anchor_job():
    job = compose_job(*DEV)
    return compose_job(*DEV, f"steps={job.anchor.steps}")


@pytest.fixture(scope="module")
def loaded(anchor_job):
    return load_shipped(anchor_job)


@pytest.fixture(scope="module")
def anchor(loaded, anchor_job) -> list:
    assert anchor_job.is_anchor
    return verdicts(render_job(loaded, anchor_job))


def test_the_anchor_scores_at_least_80_percent_on_dev(anchor) -> None:
    assert len(anchor) == 60
    overall = np.mean([v.correct for v in anchor])
    per_attribute = {a: np.mean([getattr(v, a) for v in anchor]) for a in ("colour", "shape", "position")}
    assert overall >= 0.80, (overall, per_attribute)


@pytest.mark.parametrize("overrides", [["steps=2"], AGGRESSIVE_CACHE], ids=["2-steps", "aggressive-cache"])
def test_cheaper_cells_lose_quality_measurably(loaded, anchor_job, anchor, overrides: list[str]) -> None:
    """The paired difference to the anchor (same prompts and seeds) is negative, its 95% bootstrap interval below 0."""
    steps = [] if any(o.startswith("steps=") for o in overrides) else [f"steps={anchor_job.cell.steps}"]
    cell = verdicts(render_job(loaded, compose_job(*DEV, *steps, *overrides)))
    assert [v.asked for v in cell] == [v.asked for v in anchor]
    correct = paired_difference([v.correct for v in anchor], [v.correct for v in cell])
    fit = paired_difference([v.fit for v in anchor], [v.fit for v in cell])
    assert correct.value < 0 or fit.value < 0, (correct, fit)
    assert (correct.high < 0) or (fit.high < 0), (correct, fit)

