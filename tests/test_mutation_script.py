"""scripts/mutation.py's own promises (docs/testing.md, "Mutation testing"): a sample is the same mutants every
run, the equivalents are read from their own heading only, and every module it names exists with its tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_script", ROOT / "scripts" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_sample_is_the_same_mutants_every_run_whatever_their_order() -> None:
    mutation = _script()
    names = [f"assess.verdicts.table.x_row__mutmut_{i}" for i in range(1, 50)]
    picked = mutation.sample(names, 8)
    assert len(picked) == 8 and picked == mutation.sample(list(reversed(names)), 8) == sorted(picked)
    assert mutation.sample(names, None) == sorted(names) and mutation.sample(names, 100) == sorted(names)


def test_only_the_equivalent_mutants_heading_lists_equivalents(tmp_path: Path, monkeypatch) -> None:
    mutation = _script()
    docs = tmp_path / "testing.md"
    docs.write_text("## Mutation testing\nkilled: `a.b.x_f__mutmut_1`\n### Equivalent mutants\n"
                    "| `a.b.x_f__mutmut_2` | reason |\n| `a.b.xǁCǁm__mutmut_3` | reason |\n## Next\n`a.b.x_f__mutmut_4`\n")
    monkeypatch.setattr(mutation, "DOCS", docs)
    assert mutation.equivalents() == {"a.b.x_f__mutmut_2", "a.b.xǁCǁm__mutmut_3"}


def test_every_decision_module_and_its_tests_exist() -> None:
    mutation = _script()
    for module, tests in mutation.MODULES.items():
        assert (ROOT / module).is_file(), module
        assert tests and all((ROOT / t).is_file() for t in tests), (module, tests)
