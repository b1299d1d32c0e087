"""render.compose.registry: one name per item (a second is refused, naming both places), an unknown name lists the valid
ones sorted, and a registry tied to a package finds its modules on first use, not at import."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from render.compose.registry import Registry, RegistryError


def test_a_name_taken_twice_is_refused_naming_both_places() -> None:
    shapes: Registry[str] = Registry("shape", "model.shape", str.lower)
    shapes.add("Cube", where="first.py")
    with pytest.raises(RegistryError, match=r"shape 'cube' is registered twice \(first.py and second.py\)"):
        shapes.add("CUBE", where="second.py")
    assert dict(shapes) == {"cube": "Cube"}


def test_an_unknown_name_lists_the_valid_ones_sorted_in_the_registrys_error() -> None:
    class ShapeError(ValueError):
        pass

    shapes: Registry[str] = Registry("shape", "model.shape", str, error=ShapeError)
    for name in ("torus", "cube", "sphere"):
        shapes.add(name)
    assert list(shapes) == ["torus", "cube", "sphere"] and shapes.names() == ["cube", "sphere", "torus"]
    with pytest.raises(ShapeError, match=r"^model.shape=cone: no such shape; valid: cube, sphere, torus$"):
        shapes["cone"]
    assert "cone" not in shapes and shapes["cube"] == "cube"


def test_the_decorator_registers_a_function_under_its_name() -> None:
    steps: Registry = Registry("step", "step", lambda f: f.__name__)

    @steps.register
    def warmup() -> int:
        return 1

    assert steps["warmup"] is warmup and steps.origin("warmup") == __name__


def test_a_package_tied_registry_imports_its_modules_on_first_use_only(tmp_path: Path) -> None:
    """Importing the registry imports no plug-in; the first lookup imports every public module and registers
    those that export the attribute (a module without it, or a _private one, is left out)."""
    package = tmp_path / "plugs"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent('''
        from render.compose.registry import Registry
        PLUGS = Registry("plug", "plug", lambda p: p["name"], package=__name__, attribute="PLUG")
    '''))
    (package / "b.py").write_text('PLUG = {"name": "b"}\n')
    (package / "a.py").write_text('PLUG = {"name": "a"}\n')
    (package / "helper.py").write_text("HELPS = True\n")
    (package / "_hidden.py").write_text('PLUG = {"name": "hidden"}\n')
    script = textwrap.dedent('''
        import sys
        from plugs import PLUGS
        before = sorted(m for m in sys.modules if m.startswith("plugs."))
        print(before, list(PLUGS), PLUGS.origin("a"), sorted(m for m in sys.modules if m.startswith("plugs.")))
    ''')
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[0] == "[] ['a', 'b'] plugs.a ['plugs.a', 'plugs.b', 'plugs.helper']"


def test_a_package_needs_its_attribute() -> None:
    with pytest.raises(ValueError, match="needs both"):
        Registry("plug", "plug", str, package="render.suites")


def test_get_is_the_mappings_get() -> None:
    shapes: Registry[str] = Registry("shape", "model.shape", str, error=ValueError)
    shapes.add("cube")
    assert shapes.get("cube") == "cube" and shapes.get("cone") is None and shapes.get("cone", "x") == "x"
