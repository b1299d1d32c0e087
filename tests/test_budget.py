"""The suite's time budget (tests/budget.py) fails a run whose test is past its tier's budget, unless marked long with
a reason; shared fixtures are counted once, apart. Run in-process by pytester with the budget scaled down."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SLOW_TEST = """
import time, pytest

@pytest.fixture(scope="module")
def shared():
    time.sleep(0.3)  # paid once, apart: never the test's

def test_quick(shared):
    pass

{mark}
def test_sleepy():
    time.sleep(0.3)
"""


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mark: str = "") -> pytest.RunResult:
    monkeypatch.setenv("HYPERGRID_TEST_BUDGET_SCALE", "0.1")  # 0.2 s in the default tier, 1.5 s for a shared fixture
    pytester.makepyfile(test_it=SLOW_TEST.format(mark=mark))
    return pytester.runpytest_inprocess("-p", "tests.budget", "-p", "no:cacheprovider")


def test_a_test_past_its_tiers_budget_fails_the_run_and_is_named(pytester: pytest.Pytester,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(pytester, monkeypatch)
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*OVER BUDGET: 1*", "*test_it.py::test_sleepy: 0.3 s (budget 0 s in the default tier)*"])
    assert "test_quick:" not in result.stdout.str()  # its module's shared fixture is not its time
    result.stdout.fnmatch_lines(["*the slowest shared fixtures*", "*shared (module)*"])


def test_a_test_marked_long_with_its_reason_passes(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(pytester, monkeypatch, '@pytest.mark.long("sleeps on purpose")')
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*test_sleepy  [[]long[]]*"])


def test_long_without_a_reason_is_refused(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(pytester, monkeypatch, "@pytest.mark.long")
    assert result.ret != pytest.ExitCode.OK
    assert "needs the reason it must be slow" in result.stdout.str() + result.stderr.str()


def test_modules_run_longest_first_and_unknown_ones_before_every_known_one() -> None:
    """Under --dist loadfile a module is one worker's unit, handed out in collection order: the longest start first."""
    from types import SimpleNamespace

    from tests.budget import longest_first

    ids = ["a.py::t1", "b.py::t1", "a.py::t2", "c.py::t1", "new.py::t1", "b.py::t2"]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    longest_first(items, {"a.py": 5.0, "b.py": 90.0, "c.py": 20.0})  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == ["new.py::t1", "b.py::t1", "b.py::t2", "c.py::t1", "a.py::t1", "a.py::t2"]


def test_a_users_run_without_the_budgets_variable_passes_and_prints_no_developers_report(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's `python -m pytest -q` on a loaded machine: a passing run exits 0 and prints no time budget (CI sets
    HYPERGRID_TEST_BUDGET_SCALE; a user does not)."""
    monkeypatch.delenv("HYPERGRID_TEST_BUDGET_SCALE", raising=False)
    pytester.makepyfile(test_it=SLOW_TEST.format(mark=""))
    result = pytester.runpytest_inprocess("-p", "tests.budget", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    assert "OVER BUDGET" not in result.stdout.str() and "time budget" not in result.stdout.str()


def test_the_readmes_test_command_runs_on_every_core_by_default() -> None:
    """xdist by default (the README's command as written), a module's tests on one worker (what it shares is built
    once), one torch thread per worker (two workers of two threads on two cores stall each other)."""
    import os
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    addopts = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert "-n auto" in addopts and "--dist loadfile" in addopts, addopts
    assert os.environ.get("OMP_NUM_THREADS"), "tests/conftest.py sets one torch thread unless the user chose"


def test_xdist_hands_out_the_modules_in_that_order(pytester: pytest.Pytester) -> None:
    """xdist reorders a --dist loadfile run's modules by their number of tests, most first, unless told not to: the
    longest module of the slow tier (the climb demo, one test) ran last, minutes with one worker idle."""
    config = pytester.parseconfigure("-p", "tests.budget", "-n", "2", "--dist", "loadfile")
    assert config.option.loadscopereorder is False
