"""One direction: render never imports assess (conf -> render -> run directory -> assess)."""

from __future__ import annotations

import ast
from pathlib import Path

RENDER = Path(__file__).resolve().parents[1] / "render"


def test_render_never_imports_assess() -> None:
    offenders = []
    for path in sorted(RENDER.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(RENDER.parent)}:{node.lineno} imports {n}" for n in names
                          if n == "assess" or n.startswith("assess.")]
    assert offenders == []
