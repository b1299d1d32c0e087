"""benchmarks/families.py builds, loads and times a twin's default cell through the runner's own code."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import load_benchmark


def _benchmark() -> Any:
    return load_benchmark("families")


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
