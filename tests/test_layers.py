"""The project's import graph: no cycles among its modules, and one direction between packages.

conf -> render -> run directory -> assess -> climb; the launchers (hydra_plugins.hypergrid) use
render, never assess. Edges are read statically from every module's source (imports inside
functions count: a lazy import that closes a cycle is still a cycle; imports under
`if TYPE_CHECKING:` do not, since they never run), and every module is also really imported.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("render", "assess", "hydra_plugins.hypergrid", "hypergrid")
FORBIDDEN = {"render": "assess", "hydra_plugins": "assess"}  # importer's top package -> package it must not import
# Edges allowed for now. Each says why and when it goes away.
ALLOWED: set[tuple[str, str]] = set()  # forbidden edges tolerated for now: none


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        folder = ROOT / package.replace(".", "/")
        for path in folder.rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports: each edge goes to the most specific module that exists."""
    tree = ast.parse(path.read_text(), str(path))
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    is_package = path.name == "__init__.py"
    targets = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or _type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            candidates = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for candidate in candidates:
            while candidate and candidate not in modules:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
    return targets


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    modules = project_modules()
    g = nx.DiGraph()
    g.add_nodes_from(modules)
    for name, path in modules.items():
        g.add_edges_from((name, target) for target in imports_of(name, path, modules))
    return g


@pytest.mark.slow
def test_the_graph_sees_the_imports(graph: nx.DiGraph) -> None:
    # The reader is what every other test trusts: check it on edges known to exist.
    assert graph.has_edge("render.cell", "render.axes")
    assert graph.has_edge("render.axes.caches.fbcache", "render.axes.caches._base")
    assert graph.has_edge("render.run.preflight", "render.run.loader")  # a lazy import inside a function


def test_no_import_cycles(graph: nx.DiGraph) -> None:
    cycles = [" -> ".join([*c, c[0]]) for c in nx.simple_cycles(graph)]
    assert not cycles, "import cycles:\n" + "\n".join(sorted(cycles)[:20])


def test_packages_import_in_one_direction(graph: nx.DiGraph) -> None:
    wrong = sorted(
        f"{a} -> {b}"
        for a, b in graph.edges
        if FORBIDDEN.get(a.split(".")[0]) == b.split(".")[0] and (a, b) not in ALLOWED
    )
    assert not wrong, "forbidden imports:\n" + "\n".join(wrong)


def test_allowances_are_still_needed(graph: nx.DiGraph) -> None:
    stale = sorted(f"{a} -> {b}" for a, b in ALLOWED if not graph.has_edge(a, b))
    assert not stale, f"remove these entries from ALLOWED, the edges are gone: {stale}"


@pytest.mark.parametrize("name", sorted(m for m in project_modules() if not m.endswith("__main__")))
def test_every_module_imports(name: str) -> None:
    importlib.import_module(name)


def test_the_run_directory_contract_imports_nothing_above_it(graph: nx.DiGraph) -> None:
    """conf -> render -> run directory -> assess -> climb: the contract (render.rundir) is the layer every other part
    reads, so it leans on nothing of render's but the error base."""
    wrong = sorted(f"{a} -> {b}" for a, b in graph.edges
                   if a.startswith("render.rundir") and not b.startswith("render.rundir") and b != "render.errors")
    assert not wrong, "the run-directory contract imports above itself:\n" + "\n".join(wrong)


ABOVE_THE_CLIMB = ("assess.cli", "assess.export")  # the CLI dispatches to it; the exporters read its records


def test_only_what_sits_above_the_climb_reaches_it(graph: nx.DiGraph) -> None:
    """assess's scoring, index, status and report never import the climb (it is built on them)."""
    wrong = sorted(f"{a} -> {b}" for a, b in graph.edges if a.startswith("assess.") and not a.startswith("assess.climb")
                   and not any(a == m or a.startswith(m + ".") for m in ABOVE_THE_CLIMB) and b.startswith("assess.climb"))
    assert not wrong, "imports of the climb from below it:\n" + "\n".join(wrong)


# What the launchers may use of render: its contract and its entry points, never its pipeline, axes or runner.
LAUNCHER_SURFACE = ("render.rundir", "render.errors", "render.app", "render.run.preflight", "render.run.environment",
                    "render.compose.confpath", "render.compose.splits", "render.cell", "render.run.signals", "render.laws.admission",
                    "render.run.live_metrics", "render.run.progress",  # progress: a leaf that prints bars or plain lines
                    "render.timing.sweep_round",  # the side-by-side round a sweep ends with
                    "render.timing.interleave",  # the in-process sweep rendered in interleaved rounds (its own timing)
                    "render.run.quiet",  # quiet: a leaf, the third-party filters every entry point (a batch's worker) installs
                    "render.run.secrets")  # secrets: a leaf, the credentials a launcher hands its workers through a file


def test_the_launchers_know_renders_contract_only(graph: nx.DiGraph) -> None:
    wrong = sorted(f"{a} -> {b}" for a, b in graph.edges if a.startswith("hydra_plugins") and b.startswith("render")
                   and not any(b == s or b.startswith(s + ".") for s in LAUNCHER_SURFACE))
    assert not wrong, "launchers reaching into render's internals:\n" + "\n".join(wrong)


def _importers_of(graph: nx.DiGraph, package: str) -> set[str]:
    return {a for a, b in graph.edges if (b == package or b.startswith(package + ".")) and not a.startswith(package)}


def _outside(importers: set[str], allowed: tuple[str, ...]) -> list[str]:
    return sorted(a for a in importers if not any(a == m or a.startswith(m + ".") for m in allowed))


def test_the_timing_is_built_on_the_run_never_under_it(graph: nx.DiGraph) -> None:
    """render.timing (side-by-side sessions, a sweep's round, interleaved sweeps) drives render.run; nothing below
    the entry points imports it (docs/architecture.md)."""
    wrong = _outside(_importers_of(graph, "render.timing"),
                     ("render.app", "render.__main__", "hydra_plugins", "assess"))
    assert not wrong, "imports of render.timing from below it:\n" + "\n".join(wrong)


def test_assess_layers_run_downward(graph: nx.DiGraph) -> None:
    """The report sits under the CLI, the climb, the exports and status; the verdicts under the report; the index
    under every scorer, statistic and verdict (docs/architecture.md)."""
    rules = {"assess.report": ("assess.cli", "assess.climb", "assess.export", "assess.status"),
             "assess.verdicts": ("assess.cli", "assess.climb", "assess.export", "assess.report")}
    wrong = [f"{a} -> {package}" for package, allowed in rules.items()
             for a in _outside(_importers_of(graph, package), allowed)]
    wrong += sorted(f"{a} -> {b}" for a, b in graph.edges if a.startswith("assess.index.")
                    and b.startswith(("assess.scoring", "assess.report", "assess.verdicts", "assess.climb")))
    assert not wrong, "imports against assess's layers:\n" + "\n".join(wrong)


TOP_LEVEL_AT_MOST = 8
CONVENTIONAL = {"errors", "base", "_base", "__init__", "__main__"}  # each package's error types; a plug-in family's base
FAMILY_MODULES = {"assess/metrics/shapes.py"}  # a metric family's module is named as its family (render.compose.metric_registry)


def test_each_top_level_reads_as_a_table_of_contents() -> None:
    for package in ("render", "assess"):
        modules = sorted(p.name for p in (ROOT / package).glob("*.py"))
        assert len(modules) <= TOP_LEVEL_AT_MOST, f"{package}/ holds {len(modules)} modules at its top: {modules}"


def _stem(name: str) -> str:
    """A module's name in the singular (`categories` -> `category`, `batches` -> `batch`, `verdicts` -> `verdict`)."""
    name = name.lstrip("_")
    for plural, singular in (("ies", "y"), ("ches", "ch"), ("shes", "sh"), ("s", "")):
        if name.endswith(plural):
            return name[: -len(plural)] + singular
    return name


def test_no_two_modules_are_near_twins() -> None:
    """One name, one thing: no two modules (or a module and a package) whose names differ only by a plural or their
    package, and no two side by side in one package where one is the other's name with a suffix (`verdict` and
    `verdicts`, `retime` in two packages, `categories` beside `category_report` were such pairs)."""
    named: dict[str, list[Path]] = {}
    for path in project_modules().values():
        name = path.parent.name if path.name == "__init__.py" else path.stem
        top = path.parent == ROOT / path.relative_to(ROOT).parts[0]
        if name in CONVENTIONAL or str(path.relative_to(ROOT)) in FAMILY_MODULES or (top and path.name.startswith("__")):
            continue
        named.setdefault(_stem(name), []).append(path)
    twins = [sorted(str(p.relative_to(ROOT)) for p in paths) for paths in named.values() if len(paths) > 1]
    for a, first in named.items():
        for b, second in named.items():
            twins += [[str(x.relative_to(ROOT)), str(y.relative_to(ROOT))] for x in first for y in second
                      if b.startswith(a + "_") and x.parent == y.parent and x.name != "__init__.py"]
    assert not twins, "near-twin module names:\n" + "\n".join(map(str, twins))


def test_every_package_says_what_it_holds() -> None:
    for path in project_modules().values():
        if path.name == "__init__.py":
            assert ast.get_docstring(ast.parse(path.read_text())), f"{path.relative_to(ROOT)} says nothing of what it holds"
