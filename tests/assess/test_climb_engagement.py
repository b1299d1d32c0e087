"""The climb and a cache that never engaged (its samples reused no step): it renders what cache=none renders,
so its latency is noise; the climb does not crown it, promote it, or try its family where it cannot engage."""

from __future__ import annotations

from dataclasses import replace

from assess.climb.decide import decide
from assess.climb.plan import idle_rules_out
from tests.assess.test_climb_decide import PLAN, ROOMY, cells, table

IDLE = "fbcache(threshold=0.3) at 8 steps: 0 of 8 steps reused, the cache never engaged"


def tables(idle: str | None) -> dict:
    return cells(table(("8", "none"), 4, -0.01, 0.80), table(("4", "none"), 4, -0.02, 0.90),
                 table(("8", "fbcache"), 4, -0.01, 0.40, idle_cache=idle))  # faster by noise alone when idle


def test_an_idle_cache_cell_is_not_the_incumbent_nor_promoted_and_the_reasons_say_why() -> None:
    engaged = decide(PLAN, tables(None), [], ROOMY)
    assert engaged.incumbent == ("8", "fbcache")  # the same table with an engaging cache: it would win
    d = decide(PLAN, tables(IDLE), [], ROOMY)
    assert d.incumbent == ("8", "none")
    assert not [p for p in d.proposals if p.coords[1] == "fbcache" and p.coords[0] in ("2", "4", "8")]
    assert any(r.startswith("cache never engaged: steps=8 cache=fbcache") and IDLE in r for r in d.reasons)


def test_fewer_steps_or_a_lower_threshold_is_ruled_out_more_steps_is_not() -> None:
    known = tables(IDLE)
    assert idle_rules_out(PLAN, ("4", "fbcache"), known) == ("8", "fbcache")
    assert idle_rules_out(PLAN, ("16", "fbcache"), known) is None
    assert idle_rules_out(PLAN, ("4", "taylorseer"), known) is None
    plan = replace(PLAN, axes={**PLAN.axes, "cache.threshold": ("0.1", "0.3", "0.5")}, start=("8", "none", "0.3"))
    known = {c + ("0.3",): replace(d, coords=c + ("0.3",)) for c, d in tables(IDLE).items()}
    assert idle_rules_out(plan, ("8", "fbcache", "0.1"), known) == ("8", "fbcache", "0.3")
    assert idle_rules_out(plan, ("8", "fbcache", "0.5"), known) is None
