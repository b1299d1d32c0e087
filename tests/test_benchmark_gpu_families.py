"""benchmarks/gpu_families.py: its tiny scale runs the full-size code path on the CPU; without CUDA the full scale
exits 2 saying so."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import load_benchmark


def _benchmark() -> Any:
    return load_benchmark("gpu_families")


@pytest.mark.slow
def test_the_tiny_scale_times_every_phase_of_each_family(capsys: pytest.CaptureFixture) -> None:
    rows = _benchmark().main(["--scale", "tiny", "--backend", "eager", "--repeats", "1", "--blocks", "1"])
    assert set(rows) == {"flux2-dev", "qwen-image", "wan"}
    for name, phases in rows.items():
        assert list(phases) == ["eager", "regional compile", "fp8wo + regional compile"], (name, phases)
        assert all(seconds > 0 for seconds in phases.values())
    assert "depth cut to 1 blocks per stack (--blocks)" in capsys.readouterr().out


def test_the_full_scale_without_cuda_exits_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    module = _benchmark()
    monkeypatch.setattr(module.torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as exited:
        module.main(["--models", "wan"])
    assert exited.value.code == 2 and "no CUDA device here" in capsys.readouterr().err


def test_a_deadline_skips_what_is_left(capsys: pytest.CaptureFixture) -> None:
    rows = _benchmark().main(["--scale", "tiny", "--models", "wan", "--deadline", "0", "--backend", "eager"])
    assert rows == {"wan": {}} and "skipped (the 0.0 s deadline has passed)" in capsys.readouterr().out


def test_unknown_models_are_named_with_the_valid_ones(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exited:
        _benchmark().main(["--models", "sd9"])
    assert exited.value.code == 2 and "--models sd9: no such model; valid: flux2-dev, qwen-image, wan" in capsys.readouterr().err
