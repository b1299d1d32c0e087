"""benchmarks/families.py builds, loads and times a twin's default cell through the runner's own code."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


def _benchmark():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "families.py"
    spec = importlib.util.spec_from_file_location("benchmark_families", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_families_benchmark_measures_a_twin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("HYPERGRID_CACHE", "unused")  # main() points it at a fresh folder of its own
    (figures,) = _benchmark().main(["--models", "tiny-z-image", "--repeats", "1"])
    assert figures.family == "z-image" and figures.steps == 8 and figures.size == "32x32" and figures.frames is None
    assert figures.build_s > 0 and figures.load_s > 0 and figures.warm_s > 0
    assert "| `tiny-z-image` | z-image | 8 | 32x32 |" in capsys.readouterr().out


def test_an_unknown_twin_is_named_with_the_valid_ones(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exited:
        _benchmark().main(["--models", "tiny-sd9"])
    assert exited.value.code == 2 and "--models tiny-sd9: no such twin; valid: tiny, tiny-flux2" in capsys.readouterr().err
