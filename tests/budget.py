"""The suite's time budget: a test in the default tier that takes more than 2 s, or one in a long tier (slow, slurm,
prometheus, ray) that takes more than 60 s, fails the run unless it is marked `@pytest.mark.long("why it must be slow")`.

A test's time is its call plus the setup of its own (function-scoped) fixtures; what a module or the session
shares (a sweep rendered once, the tiny model built once) is paid once and counted apart: a shared fixture past
SHARED_BUDGET_S fails the run unless it is named in LONG_FIXTURES with its reason. The guard is the developers': it
is on only where $HYPERGRID_TEST_BUDGET_SCALE sets its factor (CI: 1.5, both cores busy, where a test reads up to
about 1.5x its time on a quiet machine; a developer: 1). Then the run ends with the slowest tests, shared fixtures
and modules, so each run says where its time went (docs/testing.md). Unset (a user's `python -m pytest -q`) or 0
(a profiler, a debugger), it prints nothing and fails nothing: a passing run exits 0 under any load.

Order: under `--dist loadfile` a module is one unit of work on one worker, handed out in collection order (this
plugin turns off xdist's own reorder, which hands out the modules with most tests first), so a long module collected
last is a tail the other worker waits through. Modules run longest first, by the seconds recorded
in tests/durations.json for the tier (a module it does not know yet goes first: it may be long); a run with
HYPERGRID_TEST_DURATIONS=write records its modules' seconds there for its tier.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import pytest

TEST_BUDGET_S = {"default": 2.0, "long": 60.0}
SHARED_BUDGET_S = {"default": 15.0, "long": 240.0}
BUDGET_SCALE = "HYPERGRID_TEST_BUDGET_SCALE"  # set (CI: 1.5) to turn the guard on; unset, a user's run is judged by its tests alone
LONG_TIERS = ("slow", "slurm", "prometheus", "ray")
# Shared fixtures allowed past SHARED_BUDGET_S, with the reason (a fixture has no marks of its own).
LONG_FIXTURES: dict[str, str] = {
    "walked": "tests/test_journey.py: the README's journey walked once, in order, as a user runs it: two sweeps of the "
              "shapes model, a retime, a batch sweep and the demo climb to its final (minutes on two cores)",
}
DURATIONS = Path(__file__).with_name("durations.json")  # {tier: {module: seconds}}, the order modules run in


def run_tier(config: pytest.Config) -> str:
    """The tier a run selects (its -m expression; the default tier has none)."""
    return str(config.getoption("markexpr", "") or "default")


def longest_first(items: list[pytest.Item], seconds: dict[str, float]) -> None:
    """Reorder `items` in place, module by module, longest module first (unknown modules before every known one);
    a module's tests keep their order. The same on every worker: the order depends on the file and the items only."""
    modules: dict[str, int] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], len(modules))
    rank = {m: (m in seconds, -seconds.get(m, 0.0), first) for m, first in modules.items()}
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])


def scale() -> float:
    """The budget's factor: 0 (the guard off, and nothing printed) unless $HYPERGRID_TEST_BUDGET_SCALE asks for one.
    A user's `python -m pytest -q` on a loaded machine must not fail a passing run for its wall time."""
    return float(os.environ.get(BUDGET_SCALE, "0") or "0")


def tier_of(item: pytest.Item) -> str:
    return "long" if any(item.get_closest_marker(name) for name in LONG_TIERS) else "default"


@dataclass
class Ledger:
    """What the controller (or the only process) learns of each test's time, from its reports."""

    tests: dict[str, tuple[float, str, bool]] = field(default_factory=dict)  # nodeid -> (seconds, tier, marked long)
    shared: dict[tuple[str, str], tuple[float, str]] = field(default_factory=dict)  # (fixture, scope) -> (s, tier)
    modules: dict[str, float] = field(default_factory=dict)  # module -> its tests' setup, call and teardown seconds

    def over_budget(self) -> tuple[list[str], list[str]]:
        factor = scale()
        if factor <= 0:
            return [], []
        tests = [f"{nodeid}: {seconds:.1f} s (budget {TEST_BUDGET_S[tier] * factor:.0f} s in the {tier} tier)"
                 for nodeid, (seconds, tier, marked) in self.tests.items()
                 if not marked and seconds > TEST_BUDGET_S[tier] * factor]
        fixtures = [f"fixture {name} ({scope}): {seconds:.1f} s (budget {SHARED_BUDGET_S[tier] * factor:.0f} s in the "
                    f"{tier} tier)" for (name, scope), (seconds, tier) in self.shared.items()
                    if name not in LONG_FIXTURES and seconds > SHARED_BUDGET_S[tier] * factor]
        return tests, fixtures


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "long(reason): a test allowed past its tier's time budget (tests/budget.py), "
                                       "with the reason it must take that long")
    config.pluginmanager.register(Budget(), "hypergrid-budget")
    # xdist hands out a --dist loadfile run's modules by their number of tests, most first, unless told not to: the
    # climb demo (one test, the longest module) then ran last, a tail of minutes with the other worker idle
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


class Budget:
    """The guard of one pytest run (one per config, so a run inside a test keeps its own ledger)."""

    def __init__(self) -> None:
        self.ledger = Ledger()
        self.shared_setup: dict[str, float] = {}  # the current test's shared fixtures set up in its setup, here

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        bare = [item.nodeid for item in items if (m := item.get_closest_marker("long")) is not None
                and not (m.args or m.kwargs.get("reason"))]
        if bare:
            raise pytest.UsageError(f"@pytest.mark.long needs the reason it must be slow: {', '.join(bare)}")
        try:
            recorded = json.loads(DURATIONS.read_text()).get(run_tier(items[0].config), {}) if items else {}
        except (OSError, ValueError):
            recorded = {}
        longest_first(items, recorded)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any]) -> Generator[None, None, None]:
        started = time.perf_counter()
        yield
        if fixturedef.scope != "function":
            self.shared_setup[f"{fixturedef.argname}|{fixturedef.scope}"] = time.perf_counter() - started

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
        outcome = yield
        report = outcome.get_result()
        if call.when == "setup":  # user_properties travel with the report to xdist's controller
            report.user_properties.append(("budget_shared_setup", dict(self.shared_setup)))
            report.user_properties.append(("budget_tier", tier_of(item)))
            report.user_properties.append(("budget_long", item.get_closest_marker("long") is not None))
            self.shared_setup.clear()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props: dict[str, Any] = dict(report.user_properties)
        ledger = self.ledger
        module = report.nodeid.split("::")[0]
        ledger.modules[module] = ledger.modules.get(module, 0.0) + report.duration
        if report.when == "setup":
            shared, tier = props.get("budget_shared_setup", {}), props.get("budget_tier", "default")
            for key, seconds in shared.items():  # counted in the tier of the test that first needed it
                name, scope = key.split("|")
                if seconds > ledger.shared.get((name, scope), (0.0, tier))[0]:
                    ledger.shared[(name, scope)] = (seconds, tier)
            own = max(report.duration - sum(shared.values()), 0.0)
            ledger.tests[report.nodeid] = (own, tier, bool(props.get("budget_long")))
        elif report.when == "call" and report.nodeid in ledger.tests:
            seconds, tier, marked = ledger.tests[report.nodeid]
            ledger.tests[report.nodeid] = (seconds + report.duration, tier, marked)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if _is_xdist_worker(session.config) or not self.ledger.tests:
            return
        tests, fixtures = self.ledger.over_budget()
        if (tests or fixtures) and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if (os.environ.get("HYPERGRID_TEST_DURATIONS") == "write" and self.ledger.modules
                and session.config.rootpath == DURATIONS.parent.parent):  # this suite's run, not one inside a test
            write_durations(run_tier(session.config), self.ledger.modules)

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        ledger = self.ledger
        if _is_xdist_worker(config) or not ledger.tests or scale() <= 0:  # the developers' report, where CI asks
            return
        write = terminalreporter.write_line
        slowest = sorted(ledger.tests.items(), key=lambda kv: -kv[1][0])[:10]
        terminalreporter.section("time budget (tests/budget.py)")
        write(f"{len(ledger.tests)} tests, {sum(s for s, _, _ in ledger.tests.values()):.0f} s of test time; the slowest:")
        for nodeid, (seconds, tier, marked) in slowest:
            write(f"  {seconds:7.1f} s  {nodeid}{'  [long]' if marked else ''}")
        shared = sorted(ledger.shared.items(), key=lambda kv: -kv[1][0])[:5]
        if shared:
            write("the slowest shared fixtures (paid once per process):")
            for (name, scope), (seconds, _) in shared:
                write(f"  {seconds:7.1f} s  {name} ({scope})")
        modules = sorted(ledger.modules.items(), key=lambda kv: -kv[1])[:5]
        write("the slowest modules (each is one worker's, longest first: tests/durations.json):")
        for module, seconds in modules:
            write(f"  {seconds:7.1f} s  {module}")
        tests, fixtures = ledger.over_budget()
        if tests or fixtures:
            write(f"OVER BUDGET: {len(tests) + len(fixtures)} (make it faster, share its work, move it to the slow tier, "
                  "or mark it @pytest.mark.long(\"why\"); docs/testing.md)", red=True, bold=True)
            for line in tests + fixtures:
                write(f"  {line}", red=True)


def write_durations(tier: str, modules: dict[str, float]) -> None:
    """Record a tier's module seconds in tests/durations.json (the other tiers' entries kept)."""
    try:
        table = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        table = {}
    table[tier] = {m: round(s, 1) for m, s in sorted(modules.items())}
    DURATIONS.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")
