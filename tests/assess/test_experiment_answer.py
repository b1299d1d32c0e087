"""Issue 58, item 4: `assess report <experiment>` answers first. One sentence above its verdict table: the final's
winner as overrides, its holdout verdict, its speed-ups over the anchor and the steps-only control with intervals
and on how many prompts; before the final, where the climb stands and its next command. A timed-apart speed-up
never ranks above a side-by-side one, and reads as secondary."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest

from assess.climb.run_final import Arm, FinalResult
from assess.index.database import Index
from render.laws import Ledger, claim_final, complete_final
from render.rundir import cell_key_of
from render.rundir.session_log import ContenderTiming, TimingSession
from tests.assess.climb_fixtures import ANCHOR_KEY, DemoRuns, demo_cell, restore_hydra  # noqa: F401  (the fixture)

pytestmark = pytest.mark.usefixtures("restore_hydra")


def timed_side_by_side(db: Path, cell: str, cell_s: float, anchor_s: float, rounds: int = 8) -> None:
    """A side-by-side session of `cell` and the anchor, as `assess retime` indexes one."""
    session = TimingSession(
        session=f"s-{cell[:8]}", started_at="2026-11-30T11:00:00+00:00", finished_at="2026-11-30T11:01:00+00:00",
        device="cpu", device_name="cpu", host="h", pid=1, samples=tuple(("t", 0) for _ in range(rounds)),
        orders=tuple((0, 1) for _ in range(rounds)), device_s=1.0,
        contenders=(ContenderTiming(cell, "/r/cell", tuple(cell_s * (1 + 0.01 * i) for i in range(rounds)), 1, 0.1),
                    ContenderTiming(ANCHOR_KEY, "/r/anchor", tuple(anchor_s for _ in range(rounds)), 1, 0.1)))
    with Index.open(db) as index:
        index.upsert_timing(session)


def page_of(db: Path) -> str:
    from assess.climb.experiment_report import write_experiment_report

    return unescape(write_experiment_report("tiny-demo", db).read_text())


def answer_of(html: str) -> str:
    found = re.search(r'<p class="answer" id="answer">(.*?)</p>', html, re.S)
    assert found, "the report opens with an answer"
    assert html.index('id="answer"') < html.index('<table id="verdict-table">'), "the answer is above the table"
    return " ".join(re.sub(r"<[^>]+>", "", found.group(1)).split())


def verdict_rows(html: str) -> list[tuple[str, str, str]]:
    """(tr class, cell, timed) of each row of the verdict table, in order."""
    table = html[html.index('<table id="verdict-table">'):html.index("</table>", html.index('id="verdict-table"'))]
    return re.findall(r'<tr class="([^"]*)" data-verdict-key.*?<td class="vcell">(.*?)</td>.*?<td class="timed"[^>]*>'
                      r'(.*?)</td>', table, re.S)


@pytest.fixture
def climbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[DemoRuns, Path]:
    """Generation 1 of tiny-demo rendered and scored; steps=12 (slower than the fbcache cell) timed side by side."""
    from tests.assess.test_climb_index import first_generation

    monkeypatch.chdir(tmp_path)
    runs = DemoRuns((tmp_path / "outputs").resolve())
    db = tmp_path / "index.db"
    first_generation(runs, db)
    timed_side_by_side(db, cell_key_of(demo_cell(12)), 0.40, 0.60)
    return runs, db


@pytest.mark.slow
def test_before_the_final_the_report_says_where_the_climb_stands(climbed: tuple[DemoRuns, Path]) -> None:
    _, db = climbed
    answer = answer_of(page_of(db))
    assert re.fullmatch(r"No final yet: after generation 1, incumbent \(parity\) steps=4 cache=none scheduler=default "
                        r"\(rung 4\): parity on 4 dev prompts, \d+\.\d\d× \[\d+\.\d\d, \d+\.\d\d\] \(timed apart: "
                        r"`assess retime` times it side by side\) faster than the anchor; the climb goes on \(g1: .+\)\. "
                        r"Next: assess climb tiny-demo --apply", answer), answer


@pytest.mark.slow
def test_a_side_by_side_speedup_ranks_above_every_timed_apart_one_which_reads_as_secondary(
        climbed: tuple[DemoRuns, Path]) -> None:
    _, db = climbed
    html = page_of(db)
    rows = verdict_rows(html)[1:]  # the anchor first
    timed = [t for _, _, t in rows]
    assert timed[0] == "side by side" and all(t.startswith("timed apart") for t in timed[1:]), \
        f"the side-by-side cell ranks first, though slower than the fbcache cell timed apart: {rows}"
    assert rows[0][1].startswith("steps=12") and all("apart" in c.split() for c, _, _ in rows[1:]) \
        and "apart" not in rows[0][0].split(), "a timed-apart speed-up is marked secondary (grey), side by side not"
    marks = re.findall(r'<td class="mark">\*?(\d+)</td>', html)
    assert marks == [str(i + 1) for i in range(len(rows))], "the rows numbered in their order: the plot's marks"


@pytest.mark.slow
def test_after_the_final_the_report_opens_with_the_winner_its_holdout_verdict_and_its_speedups(
        climbed: tuple[DemoRuns, Path]) -> None:
    runs, db = climbed
    ledger = Ledger("tiny-demo", runs.root)
    claim = claim_final(ledger, {"incumbent": {"cell": {"steps": "8", "cache": "fbcache"}}})
    speed = {"value": 3.1, "low": 2.9, "high": 3.3, "n": 20}
    arms = [Arm("incumbent", ["steps=8", "cache=fbcache"], cell_key_of(demo_cell(8, "fbcache")),
                quality={"verdict": "parity", "mean": -0.001, "low": -0.0015, "high": -0.0005, "n": 30},
                speedup=speed, timed="side by side"),
            Arm("control", ["steps=8", "cache=none"], cell_key_of(demo_cell(8)), speedup={"value": 2.0}),
            Arm("anchor", ["steps=16"], ANCHOR_KEY)]
    result = FinalResult("tiny-demo", claim["at"], {"steps": "8", "cache": "fbcache"}, "steps=8 cache=fbcache", "ssim",
                         0.002, 0.05, arms, "parity",
                         vs_control={"speedup": {"value": 1.55, "low": 1.5, "high": 1.6, "n": 20},
                                     "timed": "side by side"})
    complete_final(ledger, claim, result.as_dict())
    answer = answer_of(page_of(db))
    assert answer == ("Final: steps=8 cache=fbcache, at parity on the holdout (ssim within 0.002 of the anchor on 30 "
                      "prompts); 3.10x [2.90, 3.30] (side by side) faster than the anchor, 1.55x [1.50, 1.60] (side by "
                      "side) faster than the steps-only control. Next: python -m render model=tiny steps=8 "
                      "cache=fbcache"), answer
