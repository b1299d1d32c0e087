"""Answers per category on constructed data: one category degraded on purpose while the mean stays in band
is flagged (the climb's reasons say so), and `per_category` makes parity require every category in band."""

from __future__ import annotations

from dataclasses import replace

import pytest

from assess.categories import MIN_PROMPTS, category_answers, warning
from assess.climb.decide import BudgetState, CellData, Plan, decide
from assess.climb.evaluate import correct, evaluate

CATEGORIES = ("animals", "counting", "text", "scenes")
IDS = tuple(f"dev-{i:03d}" for i in range(48))
LABELS = {p: CATEGORIES[i % len(CATEGORIES)] for i, p in enumerate(IDS)}  # 12 prompts each, round-robin
BAND = 0.05


def degraded(category: str, by: float) -> dict[str, float]:
    """Deltas near 0 everywhere but `category`, which loses `by`; the overall mean stays inside the band."""
    return {p: (-by if LABELS[p] == category else by / 3) + (0.002 if (i // 4) % 2 else -0.002) for i, p in enumerate(IDS)}


def test_each_category_gets_its_mean_and_interval_worst_first() -> None:
    answers = category_answers(degraded("text", 0.12), LABELS, BAND)
    assert [a.category for a in answers][0] == "text" and {a.n for a in answers} == {12}
    text = answers[0]
    assert text.mean == pytest.approx(-0.12, abs=1e-9) and text.low < -0.12 < text.high
    assert text.out_of_band and text.breaks and text.out_p < 1e-6
    assert not any(a.breaks for a in answers[1:])
    assert warning("steps=4", answers).startswith("steps=4 is at parity overall but out of band on 1 category: text: -0.12")


def test_a_small_category_is_shown_but_never_flagged() -> None:
    few = {p: LABELS[p] if LABELS[p] != "text" or i < 20 else None for i, p in enumerate(IDS)}
    answers = {a.category: a for a in category_answers(degraded("text", 0.12), few, BAND)}
    assert answers["text"].n < MIN_PROMPTS and answers["text"].out_of_band and not answers["text"].breaks


def test_a_cell_at_parity_that_breaks_on_a_category_is_flagged_and_per_category_denies_it() -> None:
    deltas = degraded("text", 0.12)
    overall = evaluate(deltas, {}, IDS, BAND, LABELS)
    assert abs(overall.mean) < BAND
    [plain] = correct({"c": overall}, alpha=0.05).values()
    assert plain.verdict == "parity" and [a.category for a in plain.breaks] == ["text"]
    [strict] = correct({"c": overall}, alpha=0.05, per_category=True).values()
    assert strict.verdict == "out"  # text is out of band beyond doubt
    healthy = evaluate(degraded("text", 0.01), {}, IDS, BAND, LABELS)
    assert [e.verdict for e in correct({"c": healthy}, alpha=0.05, per_category=True).values()] == ["parity"]


def test_the_climb_warns_and_with_per_category_picks_another_incumbent() -> None:
    plan = Plan(axes={"steps": ("4", "8")}, start=("8",), rungs=(48,), eta=2, band=BAND, alpha=0.05,
                higher_is_better=True, dev_ids=IDS, default_steps=8, anchor_steps=16, categories=LABELS)
    fast_but_bad_text = CellData(("4",), "k4", frozenset(IDS), degraded("text", 0.12), {p: [1.0] for p in IDS})
    slow_and_fine = CellData(("8",), "k8", frozenset(IDS), degraded("text", 0.0), {p: [2.0] for p in IDS})
    cells = {c.coords: c for c in (fast_but_bad_text, slow_and_fine)}
    budget = BudgetState(spent_s=0.0, limit_s=10_000.0, reserve_s=1_000.0)
    loose = decide(plan, cells, [], budget)
    assert loose.incumbent == ("4",)
    [note] = [r for r in loose.reasons if r.startswith("warning:")]
    assert note.startswith("warning: steps=4 is at parity overall but out of band on 1 category: text: -0.12")
    strict = decide(replace(plan, per_category=True), cells, [], budget)
    assert strict.incumbent == ("8",) and strict.current[("4",)].verdict == "out"
    assert not [r for r in strict.reasons if r.startswith("warning:")]
