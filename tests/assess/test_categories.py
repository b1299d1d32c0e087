"""Answers per category on constructed data: one category degraded on purpose while the mean stays in band
is flagged (the climb's reasons say so), and `per_category` makes parity require every category in band."""

from __future__ import annotations

from dataclasses import replace

import pytest

from render.laws.gpu_budget import Budget
from assess.statistics.categories import MIN_PROMPTS, category_answers, warning
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
    budget = BudgetState(Budget(gpu_hours=10_000.0 / 3600, reserve_gpu_hours=1_000.0 / 3600), spent_s=0.0)
    loose = decide(plan, cells, [], budget)
    assert loose.incumbent == ("4",)
    [note] = [r for r in loose.reasons if r.startswith("warning:")]
    assert note.startswith("warning: steps=4 is at parity overall but out of band on 1 category: text: -0.12")
    strict = decide(replace(plan, per_category=True), cells, [], budget)
    assert strict.incumbent == ("8",) and strict.current[("4",)].verdict == "out"
    assert not [r for r in strict.reasons if r.startswith("warning:")]


# -- the report and `assess status --json` on an index -------------------------------------

SUITE = {f"hg-{c}-{i}": f"a {c} prompt number {i}" for c in ("animals", "scenes", "text") for i in range(8)}
SUITE_CATEGORIES = {p: p.split("-")[1] for p in SUITE}


def _degraded_text_sweep(outputs, db):
    from assess.scoring.ingest import score
    from tests.assess.conftest import make_cell, noise

    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor", prompts=SUITE, categories=SUITE_CATEGORIES)
    bad_text = noise(20)  # SSIM about 0.5 on the text prompts: their mean delta -0.5, the overall mean -0.16

    def perturb(image, prompt_id, seed):
        return bad_text(image, prompt_id, seed) if SUITE_CATEGORIES[prompt_id] == "text" else image.copy()

    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=perturb, prompts=SUITE,
                categories=SUITE_CATEGORIES)
    score([sweep], db, metrics=["ssim"])
    return sweep


@pytest.mark.slow
def test_the_report_flags_a_cell_at_parity_that_breaks_on_a_category(outputs, db, tmp_path) -> None:
    from assess.report.write import write_report

    sweep = _degraded_text_sweep(outputs, db)
    html = write_report([sweep], db, out=tmp_path / "report", quality_metric="ssim", band=0.3).read_text()
    assert "Per category (ssim)" in html and "Where it breaks (ssim)" in html
    assert "is at parity overall but out of band on 1 category: text: -" in html
    table = html.split('id="categories-table"', 1)[1].split("</table>", 1)[0]
    assert table.count("✗") == 1  # only text, only for the one cell
    plain = write_report([sweep], db, out=tmp_path / "plain", quality_metric="ssim").read_text()
    # without --band, the categories are judged at the default band, which says where it comes from
    assert "band ±0.05" in plain and "ssim&#39;s documented default" in plain
    psnr = write_report([sweep], db, out=tmp_path / "psnr", quality_metric="psnr").read_text()
    assert "is at parity overall" not in psnr and "no parity band given" in psnr  # PSNR has no default band
    breaks = plain.split('id="where-it-breaks"', 1)[1].split('id="contact-sheets"', 1)[0]
    assert breaks.count("<td>text</td>") == 4  # the worst prompts are the degraded category's
    assert len(list((tmp_path / "plain" / "images").rglob("*.png"))) >= 8


def test_status_json_carries_each_cells_answers_per_category(outputs, db) -> None:
    from click.testing import CliRunner

    from assess.cli import cli

    sweep = _degraded_text_sweep(outputs, db)
    result = CliRunner().invoke(cli, ["status", str(sweep), "--json", "--db", str(db), "--band", "0.3"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    import json

    rows = {r["name"]: r for r in json.loads(result.output)}
    quality = rows["steps=8"]["quality"]["smoke"]
    assert quality["metric"] == "ssim" and quality["what_if"]["verdict"] == "parity" and quality["warning"]
    assert "verdict" not in quality and quality["what_if"]["label"].startswith("what if: band=0.3")  # (issue 28)
    by_category = {c["category"]: c for c in quality["categories"]}
    assert by_category["text"]["breaks"] and by_category["text"]["n"] == 8 and by_category["text"]["low"] is not None
    assert not by_category["animals"]["breaks"] and by_category["animals"]["mean"] == pytest.approx(0.0, abs=1e-9)
    assert "quality" not in rows["anchor"]
    bad = CliRunner().invoke(cli, ["status", str(sweep), "--json", "--db", str(db), "--quality-metric", "fid"])
    assert bad.exit_code == 1 and "unknown quality metric 'fid'" in bad.output


@pytest.mark.slow
def test_an_experiment_on_the_suite_gives_the_climb_its_categories_and_per_category() -> None:
    from assess.experiment import load_experiment

    exp = load_experiment("tiny-demo", ["experiment.dev=suite-dev", "experiment.holdout=suite-holdout",
                                        "experiment.quality.per_category=true", "experiment.quality.category_min_prompts=3"])
    plan = Plan.from_experiment(exp)
    assert plan.per_category and plan.category_min_prompts == 3
    assert len(plan.categories) == 216 and set(plan.categories.values()) >= {"text", "counting", "long"}
    assert not Plan.from_experiment(load_experiment("tiny-demo")).per_category
