"""The run directory's file names are written once, in render/rundir: code elsewhere takes them from there, so
renaming one cannot leave a reader or a writer behind."""

from __future__ import annotations

import pytest
import ast
from pathlib import Path

from render import rundir

ROOT = Path(__file__).resolve().parents[2]
NAMES = {rundir.RUN_JSON, rundir.SAMPLES, rundir.DONE, rundir.FAILED, rundir.SWEEP_JSON, rundir.JOBS_JSON,
         rundir.MULTIRUN_YAML, rundir.LOG, rundir.STATE_DIR}
# Tolerated for now, each with its reason; the test fails when one is gone, so the list cannot go stale.
ALLOWED: set[tuple[str, str]] = set()  # literals tolerated for now: none


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            ids.add(id(body[0].value))
    return ids


@pytest.mark.slow
def test_no_code_outside_the_contract_spells_a_run_directory_file_name() -> None:
    found = []
    for package in ("render", "assess", "hydra_plugins"):
        for path in (ROOT / package).rglob("*.py"):
            if (ROOT / "render" / "rundir") in path.parents:
                continue
            tree = ast.parse(path.read_text())
            docs = _docstrings(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                    if node.value in NAMES or any(node.value.endswith("/" + n) for n in NAMES):
                        found.append((str(path.relative_to(ROOT)), node.value, node.lineno))
    wrong = [f"{p}:{line}: {value!r}" for p, value, line in found if (p, value) not in ALLOWED]
    assert not wrong, "use the names render.rundir exports:\n" + "\n".join(wrong)
    stale = ALLOWED - {(p, value) for p, value, _ in found}
    assert not stale, f"remove these from ALLOWED, the literals are gone: {sorted(stale)}"
