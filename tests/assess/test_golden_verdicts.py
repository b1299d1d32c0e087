"""Golden verdicts (issue 59): known deltas, both signs, both metric directions, each parity test, around the band's
edge, through the one function every screen decides with (assess.statistics.compare.parity_decision) and through each
screen's own path to it: the verdict table's rule (the report and `assess status`), its row, the answer line, and
the climb's evaluation. A verdict that one path turns around fails here, whichever path it is.

The deltas are 8 prompts at `mean` +- 0.002 (standard error 0.00076): at band 0.01 and alpha 0.05 a mean 0.0025
inside the band's edge is decided parity, 0.0025 past it out, and 0.0005 either side of it undecided."""

from __future__ import annotations

import pytest

from assess.climb.evaluate import correct, evaluate
from assess.statistics.compare import Verdict, parity_decision
from assess.verdicts.answer import sentence
from assess.verdicts.table import Quality, Rule, Speed, context, row

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
    return row("1", "cache=fbcache", "cell", "anchor", rule, [quality], Speed(None, "timed apart"), None)


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
