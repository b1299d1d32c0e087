"""Mutation testing of the decision core (docs/testing.md, "Mutation testing"): mutmut 3 over each decision module
with the fast tests that guard it, and the score per module.

    python scripts/mutation.py                          # every module, every mutant (the full run: hours on 2 cores)
    python scripts/mutation.py --module assess/verdicts/table.py
    python scripts/mutation.py --sample 12 --changed origin/main --strict   # CI: 12 mutants of each module a change touches

A module's score is its killed mutants over its mutants not listed as equivalent in docs/testing.md (a mutant that
hangs its tests past mutmut's timeout counts as killed; one no test reaches counts as a survivor). `--strict` fails
when a mutant survives that is neither equivalent (docs/testing.md) nor a known survivor still to be killed
(scripts/mutation_survivors.txt, written by `--record`): a new survivor is a promise left unguarded.

Each module runs in a process of its own (mutmut's configuration is process-wide): mutmut copies the packages into
mutants/, collects which test reaches which function, then runs each mutant against the tests that reach it, on at
most `--max-children` workers. The test-time budget (tests/budget.py) is off: a mutant's fork pays imports a test
does not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "testing.md"
KNOWN = ROOT / "scripts" / "mutation_survivors.txt"

SURVIVORS_HEADER = ("# Mutants of the decision core that survive the fast tests and are not equivalent: each is a promise still to\n"
                    "# be guarded by a test named after it (docs/testing.md, \"Mutation testing\"). Written by\n"
                    "# `python scripts/mutation.py --record`; `--strict` (CI) fails on a survivor not listed here.\n")

# each decision module and the fast (default-tier) tests that guard it
MODULES: dict[str, tuple[str, ...]] = {
    "assess/statistics/parity.py": ("tests/assess/test_parity.py",),
    "assess/statistics/compare.py": ("tests/assess/test_stats.py", "tests/assess/test_noninferiority.py",
                                     "tests/assess/test_golden_verdicts.py", "tests/assess/test_resample.py"),
    "assess/statistics/side_by_side.py": ("tests/test_retime.py", "tests/assess/test_parity.py"),
    "assess/statistics/resample.py": ("tests/assess/test_resample.py",),
    "assess/statistics/floor.py": ("tests/assess/test_floor_measure.py", "tests/assess/test_floor.py"),
    "assess/verdicts/table.py": ("tests/assess/test_golden_verdicts.py", "tests/assess/test_verdict_table.py"),
    "assess/verdicts/answer.py": ("tests/assess/test_golden_verdicts.py", "tests/assess/test_verdict_table.py"),
    "assess/verdicts/recorded.py": ("tests/laws/test_evidence.py", "tests/assess/test_verdict_table.py"),
    "assess/verdicts/default_rule.py": ("tests/test_default_path.py", "tests/assess/test_verdict_table.py"),
    "assess/climb/decide.py": ("tests/assess/test_climb_decide.py", "tests/assess/test_noninferiority.py"),
    "assess/climb/speed_choice.py": ("tests/assess/test_climb_objective.py", "tests/assess/test_climb_speed.py",
                                     "tests/assess/test_golden_verdicts.py"),
    "assess/climb/evaluate.py": ("tests/assess/test_golden_verdicts.py", "tests/assess/test_categories.py",
                                 "tests/assess/test_climb_decide.py"),
    "render/rundir/store.py": ("tests/test_runner_promises.py", "tests/rundir/test_samples.py"),
    "render/run/runner.py": ("tests/test_runner_promises.py", "tests/test_classify.py", "tests/rundir/test_samples.py"),
    "render/laws/holdout.py": ("tests/laws/test_prompt_options.py", "tests/laws/test_evidence_sources.py",
                               "tests/laws/test_ledger.py"),
    "render/laws/admission.py": ("tests/laws/test_ledger.py", "tests/laws/test_evidence.py",
                                 "tests/test_experiment_guards.py"),
}
DETECTED = {"killed", "timeout", "caught by type check", "segfault"}


class MutmutFailed(RuntimeError):
    """mutmut could not measure a module (its tests fail unmutated, or none reaches it)."""


@dataclass(frozen=True)
class Score:
    module: str
    mutants: int
    killed: int
    equivalent: int
    survivors: tuple[str, ...]  # neither killed nor equivalent
    seconds: float

    @property
    def percent(self) -> float:
        judged = self.mutants - self.equivalent
        return 100.0 * self.killed / judged if judged else 100.0

    def line(self) -> str:
        return (f"{self.module:40s} {self.percent:5.1f} %  {self.killed:4d} killed of {self.mutants - self.equivalent:4d}"
                f" ({self.equivalent} equivalent, {len(self.survivors)} survived)  {self.seconds:6.0f} s")


def dotted(module: str) -> str:
    return module.removesuffix(".py").replace("/", ".")


def listed(text: str) -> set[str]:
    """The mutant names a text lists (`assess.x.y.x_f__mutmut_3`)."""
    return set(re.findall(r"[\w.]+\.x[\wǁ]*__mutmut_\d+", text))


def equivalents() -> set[str]:
    """The mutants docs/testing.md lists under "### Equivalent mutants" (up to the next heading), each with its
    reason."""
    text = DOCS.read_text()
    start = text.find("### Equivalent mutants")
    if start < 0:
        return set()
    end = text.find("\n#", start + 1)
    return listed(text[start:end if end >= 0 else len(text)])


def known_survivors() -> set[str]:
    return listed(KNOWN.read_text()) if KNOWN.exists() else set()


def changed_modules(base: str) -> list[str]:
    """The decision modules that differ from `base` (git diff, committed or not)."""
    out = subprocess.run(["git", "diff", "--name-only", base, "--"], cwd=ROOT, capture_output=True, text=True, check=True)
    changed = set(out.stdout.split())
    return [m for m in MODULES if m in changed]


def sample(names: list[str], n: int | None) -> list[str]:
    """A deterministic sample of `n` mutants (by the hash of each name, so a run picks the same ones again)."""
    if n is None or n >= len(names):
        return sorted(names)
    return sorted(sorted(names, key=lambda name: hashlib.sha256(name.encode()).hexdigest())[:n])


def child(module: str, names: list[str], max_children: int, generate_only: bool) -> None:
    """In its own process: mutmut configured for one module and its tests; generate its mutants, or run them."""
    os.chdir(ROOT)
    from mutmut import __main__ as mutmut
    from mutmut.configuration import config

    cfg = config()
    cfg.only_mutate = [module]
    cfg.pytest_add_cli_args_test_selection = list(MODULES[module])
    if generate_only:
        mutmut.copy_src_dir()
        mutmut.copy_also_copy_files()
        mutmut.setup_source_paths()
        mutmut.create_mutants(max_children)
        return
    mutmut._run(names, max_children)


def mutant_names(module: str) -> list[str]:
    text = (ROOT / "mutants" / module).read_text()
    return [f"{dotted(module)}.{name}" for name in re.findall(r"def (x\S*?__mutmut_\d+)\(", text)]


def spawn(module: str, names: list[str], max_children: int, generate_only: bool = False) -> None:
    args = [sys.executable, __file__, "--child", module, "--max-children", str(max_children), *names]
    if generate_only:
        args.append("--generate-only")
    env = {**os.environ, "HYPERGRID_TEST_BUDGET_SCALE": "0", "OMP_NUM_THREADS": "1"}
    quiet = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
    if quiet.returncode != 0:
        sys.stderr.write(quiet.stdout[-4000:] + quiet.stderr[-4000:])
        raise MutmutFailed(f"mutmut failed on {module} (exit {quiet.returncode}; its output above)")


def results(module: str, names: list[str]) -> dict[str, str]:
    from mutmut.stats import status_by_exit_code

    meta = json.loads((ROOT / "mutants" / f"{module}.meta").read_text())["exit_code_by_key"]
    return {name: status_by_exit_code[meta.get(name)] for name in names}


def forget(module: str) -> None:
    """Drop mutmut's copy of the module, its results and the map of which test reaches which function: a copy left
    by another module's run looks already mutated to mutmut (a newer file), results kept from older tests would be
    counted again, and a map made while this module was not mutated (another module's run with the same tests)
    reaches none of its functions."""
    for path in (ROOT / "mutants" / module, ROOT / "mutants" / f"{module}.meta", ROOT / "mutants" / "mutmut-stats.json"):
        path.unlink(missing_ok=True)


def score(module: str, n: int | None, max_children: int, equivalent: set[str]) -> Score:
    t0 = time.monotonic()
    forget(module)
    spawn(module, [], max_children, generate_only=True)
    names = sample(mutant_names(module), n)
    spawn(module, names, max_children)
    status = results(module, names)
    killed = sum(s in DETECTED for s in status.values())
    same = sum(name in equivalent for name in names)
    survivors = tuple(name for name, s in status.items() if s not in DETECTED and name not in equivalent)
    return Score(module, len(names), killed, same, survivors, time.monotonic() - t0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", action="append", choices=sorted(MODULES), help="a decision module (repeatable; "
                        "default: all)")
    parser.add_argument("--sample", type=int, help="at most this many mutants per module, the same ones every run")
    parser.add_argument("--changed", metavar="BASE", help="only the modules that differ from this git revision")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a mutant survives that is neither "
                        "equivalent (docs/testing.md) nor a known survivor (scripts/mutation_survivors.txt)")
    parser.add_argument("--record", action="store_true", help="write this run's survivors to "
                        "scripts/mutation_survivors.txt (those of the modules not run are kept)")
    parser.add_argument("--budget-s", type=float, help="start no module after this many seconds (CI's bound); "
                        "those left are named, not checked")
    parser.add_argument("--max-children", type=int, default=2, help="mutmut's worker processes (default 2)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--generate-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("names", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.names, args.max_children, args.generate_only)
        return 0
    modules = args.module or list(MODULES)
    if args.changed:
        modules = [m for m in modules if m in changed_modules(args.changed)]
        print(f"decision modules changed since {args.changed}: {', '.join(modules) or 'none'}")
    equivalent, known = equivalents(), known_survivors()
    scores = []
    failed, started = [], time.monotonic()
    for i, module in enumerate(modules):
        if args.budget_s is not None and time.monotonic() - started > args.budget_s:
            print(f"not checked within {args.budget_s:.0f} s: {', '.join(modules[i:])}")
            break
        try:
            scores.append(score(module, args.sample, args.max_children, equivalent))
        except MutmutFailed as error:
            failed.append(module)
            print(f"{module:40s} not measured: {error}", flush=True)
            continue
        print(scores[-1].line(), flush=True)
    new = [name for s in scores for name in s.survivors if name not in known]
    if args.record:
        kept = {name for name in known if not any(name.startswith(dotted(s.module) + ".") for s in scores)}
        survivors = sorted(kept | {n for s in scores for n in s.survivors})
        KNOWN.write_text(SURVIVORS_HEADER + "".join(f"{name}\n" for name in survivors))
    if new:
        print(f"{len(new)} survivor(s) neither equivalent nor known (`mutmut show NAME` shows each): " + " ".join(new))
    return 1 if failed or args.strict and new else 0


if __name__ == "__main__":
    raise SystemExit(main())
