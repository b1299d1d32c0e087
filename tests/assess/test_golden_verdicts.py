"""Golden verdicts (issue 59): known deltas, both signs, both metric directions, each parity test, around the band's
edge, through the one function every screen decides with (assess.statistics.compare.parity_decision) and through each
screen's own path to it: the verdict table's rule (the report and `assess status`), its row, the answer line, and
the climb's evaluation. A verdict that one path turns around fails here, whichever path it is.

The deltas are 8 prompts at `mean` +- 0.002 (standard error 0.00076): at band 0.01 and alpha 0.05 a mean 0.0025
inside the band's edge is decided parity, 0.0025 past it out, and 0.0005 either side of it undecided."""

from __future__ import annotations

import pytest

from assess.climb.evaluate import Evaluation, correct, evaluate, verdict_of
from assess.statistics.compare import Verdict, parity_decision
from assess.verdicts.answer import sentence
from assess.verdicts.table import Quality, Rule, Speed, context, differing, row

BAND, ALPHA = 0.01, 0.05
NONINF, EQUIV = "noninferiority", "equivalence"
HIGHER, LOWER = True, False
PARITY, OUT, UNDECIDED, NO_DATA = Verdict.PARITY, Verdict.OUT, Verdict.UNDECIDED, Verdict.NO_DATA


def deltas(mean: float, spread: float = 0.002, n: int = 8) -> list[float]:
    return [mean + spread * (-1) ** i for i in range(n)]


# (test, higher is better, the deltas' mean, the verdict)
GOLDEN = [
    # non-inferiority on a higher-is-better metric (CLIP score): worse is negative
    (NONINF, HIGHER, -0.3, OUT),  # the row: 0.3 worse is out at band 0.01
    (NONINF, HIGHER, -0.0125, OUT),  # just past the band's edge
    (NONINF, HIGHER, -0.0105, UNDECIDED),
    (NONINF, HIGHER, -0.01, UNDECIDED),  # on the edge
    (NONINF, HIGHER, -0.0095, UNDECIDED),
    (NONINF, HIGHER, -0.0075, PARITY),  # just inside the edge
    (NONINF, HIGHER, 0.0, PARITY),
    (NONINF, HIGHER, 0.0125, PARITY),  # better than the band: still parity (one-sided)
    (NONINF, HIGHER, 0.3, PARITY),
    # non-inferiority on a lower-is-better metric (LPIPS): worse is positive; the same deltas, the mirrored verdicts
    (NONINF, LOWER, -0.3, PARITY),  # the row: the same delta 0.3 below the anchor is parity
    (NONINF, LOWER, -0.0125, PARITY),
    (NONINF, LOWER, 0.0, PARITY),
    (NONINF, LOWER, 0.0075, PARITY),
    (NONINF, LOWER, 0.0095, UNDECIDED),
    (NONINF, LOWER, 0.01, UNDECIDED),
    (NONINF, LOWER, 0.0105, UNDECIDED),
    (NONINF, LOWER, 0.0125, OUT),
    (NONINF, LOWER, 0.3, OUT),
    # equivalence (TOST): both sides of the band count, whatever the direction
    *[(EQUIV, direction, mean, verdict) for direction in (HIGHER, LOWER) for mean, verdict in [
        (-0.3, OUT), (-0.0125, OUT), (-0.0105, UNDECIDED), (-0.01, UNDECIDED), (-0.0095, UNDECIDED),
        (-0.0075, PARITY), (0.0, PARITY), (0.0075, PARITY), (0.0095, UNDECIDED), (0.01, UNDECIDED),
        (0.0105, UNDECIDED), (0.0125, OUT), (0.3, OUT)]],
]
# no spread (every prompt the same delta): the value alone decides
FLAT = [
    (NONINF, HIGHER, -0.3, OUT), (NONINF, HIGHER, -0.005, PARITY), (NONINF, HIGHER, 0.3, PARITY),
    (NONINF, LOWER, 0.3, OUT), (NONINF, LOWER, 0.005, PARITY), (NONINF, LOWER, -0.3, PARITY),
    (EQUIV, HIGHER, 0.3, OUT), (EQUIV, HIGHER, -0.3, OUT), (EQUIV, HIGHER, 0.005, PARITY), (EQUIV, LOWER, -0.005, PARITY),
]
CASES = ([pytest.param(t, h, deltas(m), v, id=f"{t}-{'higher' if h else 'lower'}-{m:+g}-{v}") for t, h, m, v in GOLDEN]
         + [pytest.param(t, h, deltas(m, spread=0.0), v, id=f"{t}-{'higher' if h else 'lower'}-flat{m:+g}-{v}")
            for t, h, m, v in FLAT]
         + [pytest.param(t, h, [-0.3], UNDECIDED, id=f"{t}-{'higher' if h else 'lower'}-one-prompt-undecided")
            for t in (NONINF, EQUIV) for h in (HIGHER, LOWER)]
         + [pytest.param(t, h, [], NO_DATA, id=f"{t}-{'higher' if h else 'lower'}-no-prompt-no-data")
            for t in (NONINF, EQUIV) for h in (HIGHER, LOWER)])


def table_row(rule: Rule, values: list[float]) -> dict:
    """The verdict table's row of a cell with these deltas (the report's and `assess status`'s)."""
    quality = Quality(rule.metric, {f"p{i:02d}": v for i, v in enumerate(values)}, None)
    return row("1", "cache=fbcache", "cell", "anchor", rule, [quality], Speed(None, "timed apart"))


def climb_verdict(test: str, higher: bool, values: list[float]) -> Verdict:
    """The climb's verdict of a cell with these deltas on its rung's prompts (assess.climb.evaluate)."""
    ids = [f"p{i:02d}" for i in range(max(len(values), 1))]
    e = evaluate(dict(zip(ids, values)), {}, ids, BAND, test=test, higher_is_better=higher)
    return correct({"cell": e}, ALPHA)["cell"].verdict


ANSWER_OPENS = {PARITY: "Fastest at parity: cache=fbcache", OUT: "No cell of this sweep is at parity: every one is out",
                UNDECIDED: "No cell at parity yet: 1 cell(s) undecided", NO_DATA: "No verdict yet: the cells have no"}


@pytest.mark.parametrize(("test", "higher", "values", "verdict"), CASES)
def test_every_screen_gives_the_golden_verdict_for_known_deltas(test: str, higher: bool, values: list[float],
                                                                verdict: Verdict) -> None:
    rule = Rule("clip_score", BAND, ALPHA, test, higher)
    assert parity_decision(values, BAND, ALPHA, test, higher) == verdict, "the one function"
    assert rule.verdict(values) == verdict, "the verdict table's rule (report, status)"
    cell = table_row(rule, values)
    assert cell["verdict"] == str(verdict), "the verdict table's row"
    answer = sentence(context(rule, [cell], []), "smoke", "outputs/sweep")
    assert answer.text.startswith(ANSWER_OPENS[verdict]), f"the answer line: {answer}"
    assert climb_verdict(test, higher, values) == verdict, "the climb"


def test_a_cell_0_3_worse_on_a_higher_is_better_metric_is_out_at_band_0_01_and_the_same_delta_is_parity_when_lower_is_better(
        ) -> None:
    worse = deltas(-0.3)
    assert Rule("clip_score", 0.01, higher_is_better=True).verdict(worse) == Verdict.OUT
    assert Rule("lpips", 0.01, higher_is_better=False).verdict(worse) == Verdict.PARITY


def test_without_a_band_the_table_gives_no_verdict_and_the_answer_asks_for_one() -> None:
    rule = Rule("clip_score", None)
    assert rule.verdict(deltas(-0.3)) is None
    cell = table_row(rule, deltas(-0.3))
    assert cell["verdict"] == "no band"
    assert sentence(context(rule, [cell], [])).next.endswith("--band B")


def _broken_category_at_parity() -> Evaluation:
    """A cell at parity overall (16 prompts) that is out of band on one category of 8 (issue 59's survivors)."""
    ids = [f"p{i:02d}" for i in range(16)]
    values = dict(zip(ids, deltas(0.3) + deltas(-0.03)))
    categories = {p: ("good" if i < 8 else "bad") for i, p in enumerate(ids)}
    return evaluate(values, {}, ids, BAND, categories)


def test_the_climbs_verdict_ignores_a_broken_category_unless_the_rule_asks_per_category() -> None:
    e = _broken_category_at_parity()
    assert [a.category for a in e.breaks] == ["bad"]
    assert verdict_of(e, ALPHA) == Verdict.PARITY, "per category is off unless asked"
    assert verdict_of(e, ALPHA, per_category=True) == Verdict.OUT


def test_an_evaluation_without_a_delta_is_no_data_whoever_asks() -> None:
    e = evaluate({}, {}, ["p00", "p01"], BAND)
    assert e.verdict == Verdict.NO_DATA and e.missing == ("p00", "p01")
    assert verdict_of(e, ALPHA) == Verdict.NO_DATA


def test_an_evaluation_as_a_dict_holds_every_figure_and_its_categories_as_dicts() -> None:
    e = _broken_category_at_parity()
    out = e.as_dict()
    assert out["n"] == 16 and out["verdict"] == e.verdict and out["tost_p"] == e.tost_p
    assert [c["category"] for c in out["categories"]] == [a.category for a in e.categories]
    assert all(isinstance(c, dict) for c in out["categories"])


def test_the_anchors_row_is_the_reference_and_a_verdicts_css_class_is_its_words_hyphenated() -> None:
    rule = Rule("clip_score", BAND)
    anchor = row("A", "anchor", "a", "a", rule, [Quality("clip_score", {}, None)], Speed(None, "timed apart"),
                 is_anchor=True)
    assert (anchor["verdict"], anchor["speedup"], anchor["timed"]) == ("anchor", "1× (reference)", "—")
    assert anchor["quality"] == [{"metric": "clip_score", "text": "reference"}]
    cell = row("1", "x", "c", "a", Rule("clip_score", None), [Quality("clip_score", {"p": 0.1}, None)],
               Speed(None, "timed apart", note="no warm latency"))
    assert (cell["verdict"], cell["verdict_cls"], cell["speed_note"]) == ("no band", "no-band", "no warm latency")


def test_a_cells_label_is_its_overrides_that_differ_and_without_any_its_first_three_but_prompts_and_seed() -> None:
    assert differing([["cache=fbcache", "steps=4", "seed=0"], ["cache=none", "steps=4", "seed=1"]]) == \
        [["cache=fbcache"], ["cache=none"]]
    shared = ["prompts=dev", "seed=0", "steps=4", "cache=none", "attention=sdpa", "compile=none"]
    assert differing([shared, shared]) == [["steps=4", "cache=none", "attention=sdpa"]] * 2


def test_the_pareto_front_keeps_every_point_no_other_beats_on_both_and_drops_the_dominated() -> None:
    from assess.statistics.compare import pareto_front

    points = [(1.0, 1.0), (2.0, 0.0), (0.0, 2.0), (0.5, 0.5), (1.0, 1.0)]
    assert pareto_front(points) == [0, 1, 2, 4], "(0.5, 0.5) is beaten on both; equal points are all kept"
    assert pareto_front([(1.0, 1.0), (2.0, 2.0)], maximize=(False, False)) == [0]


def test_a_mean_interval_of_no_values_is_refused_saying_so() -> None:
    from assess.statistics.compare import mean_interval

    with pytest.raises(ValueError, match="no values"):
        mean_interval([])


def _answer_of(*cells: tuple[str, float, float, str, list[float]]) -> str:
    """The answer line of a table of cells (label, speed-up, its low end, how it was timed, deltas) at BAND."""
    from assess.statistics.compare import Estimate

    rule = Rule("clip_score", BAND)
    rows = [row(str(i), label, label, "a", rule, [Quality("clip_score", {f"p{j:02d}": d for j, d in enumerate(values)},
                                                          None)],
                Speed(Estimate(speed, low, speed + 0.1, 8), timed))
            for i, (label, speed, low, timed, values) in enumerate(cells)]
    return str(sentence(context(rule, rows, []), "smoke", "outputs/sweep"))


def test_the_answer_prefers_a_cell_timed_side_by_side_and_says_its_prompts() -> None:
    answer = _answer_of(("cache=a", 3.0, 2.9, "timed apart", deltas(0.0)), ("cache=b", 2.0, 1.9, "side by side", deltas(0.0)))
    assert answer.startswith("Fastest at parity: cache=b, 2.00× [1.90, 2.10] (side by side) faster"), answer
    assert "on 8 prompts" in answer


def test_a_cell_timed_apart_is_never_called_not_yet_surely_faster() -> None:
    assert "Not yet surely faster" not in _answer_of(("cache=a", 1.2, 0.9, "timed apart", deltas(0.0)))
    assert "Not yet surely faster" in _answer_of(("cache=a", 1.2, 0.9, "side by side", deltas(0.0)))


def test_only_a_faster_undecided_cell_asks_for_more_prompts_not_a_faster_out_one() -> None:
    out_faster = _answer_of(("cache=a", 2.0, 1.9, "side by side", deltas(0.0)), ("cache=b", 3.0, 2.9, "side by side", deltas(-0.3)))
    assert "undecided" not in out_faster and out_faster.endswith("Next: `assess report outputs/sweep`"), out_faster
    undecided = _answer_of(("cache=a", 2.0, 1.9, "side by side", deltas(0.0)), ("cache=b", 3.0, 2.9, "side by side", deltas(-0.01)))
    assert "1 faster cell(s) undecided on 8 prompts" in undecided, undecided


def test_when_every_cell_is_out_the_answer_suggests_gentler_settings() -> None:
    answer = _answer_of(("cache=a", 2.0, 1.9, "side by side", deltas(-0.3)))
    assert "; try gentler settings (more steps, a lower cache threshold), or a band of your own. Next: " in answer, answer


def test_the_next_render_splits_each_override_at_its_first_equals_sign() -> None:
    from assess.verdicts.answer import next_render

    assert next_render([{"label": "+pipe.kw=a=b cache=x"}, {"label": "cache=y"}], "dev") == \
        "python -m render -m +pipe.kw=a=b cache=x,y seed=[0,1]"
    assert next_render([{"label": "+pipe.kw=a=b"}, {"label": "+pipe.kw=a=c"}], "dev") == \
        "python -m render -m +pipe.kw=a=b,a=c seed=[0,1]"  # two values of +pipe.kw, not of +pipe.kw=a


def test_a_side_by_side_figure_without_an_interval_is_a_ratio_without_one_and_a_cell_without_a_key_has_none() -> None:
    from assess.climb.plan import CellData
    from assess.climb.speed_choice import timed_together
    from tests.assess.test_climb_speed import PLAN

    a = CellData(("a",), "key-a", side_by_side={"key-b": (0.5, None, None, 3)})
    ratio = timed_together(PLAN, a, CellData(("b",), "key-b"))
    assert ratio is not None and (ratio.value, ratio.low, ratio.high) == (0.5, None, None)
    assert timed_together(PLAN, CellData(("a",), "key-a", side_by_side={"": (0.5, 0.4, 0.6, 3)}), CellData(("b",), "")) \
        is None, "a cell without a key was never timed"


def test_a_batched_cell_at_parity_with_the_fewest_gpu_seconds_an_image_is_named_beside_the_fastest() -> None:
    """The answer's throughput half reads each row's batch and its one cost per image (assess.statistics.cost): the
    fastest cell at parity, and the batched one that renders the most images per GPU-hour."""
    from assess.statistics.compare import Estimate

    rule = Rule("clip_score", BAND)
    quality = [Quality("clip_score", {f"p{j:02d}": d for j, d in enumerate(deltas(0.0))}, None)]
    fast = row("1", "batch=1", "k1", "a", rule, quality, Speed(Estimate(3.0, 2.9, 3.1, 8), "side by side",
                                                               gpu_s_per_image=0.30))
    batched = row("2", "batch=4", "k4", "a", rule, quality, Speed(Estimate(1.5, 1.4, 1.6, 8), "side by side", batch=4,
                                                                  gpu_s_per_image=0.15))
    answer = str(sentence(context(rule, [fast, batched], []), "smoke", "outputs/sweep"))
    assert answer.startswith("Fastest at parity: batch=1, 3.00×"), answer
    assert "Most images per GPU-hour at parity: batch=4, 0.0417 GPU-h per 1,000 images (0.0833 GPU-h for the fastest)" \
        in answer, answer


@pytest.mark.parametrize("verdict, said, next_command", [
    ("parity", "at parity on the holdout (ssim within 0.01 of the anchor on 40 prompts)", "python -m render steps=4"),
    ("out", "out on the holdout (ssim, band 0.01, 40 prompts)", "assess report demo"),
    ("undecided", "undecided on the holdout (ssim, band 0.01, 40 prompts)", "assess report demo"),
    (None, "not judged on the holdout yet (40 prompts scored)", "assess report demo"),
])
def test_the_finals_answer_says_its_holdout_verdict_and_only_a_winner_at_parity_is_rendered_next(
        verdict: str | None, said: str, next_command: str) -> None:
    from assess.verdicts.answer import Final, final_sentence

    over = {"speedup": "2.00× [1.90, 2.10]", "timed": "side by side"}
    f = Final("demo", "steps=4", verdict, "ssim", 0.01, 40, over, None, "", "python -m render steps=4")
    answer = final_sentence(f)
    assert answer.text == (f"Final: steps=4, {said}; 2.00× [1.90, 2.10] (side by side) faster than the anchor, no "
                           "steps-only control to compare with (not rendered on the holdout).")
    assert answer.next == next_command
