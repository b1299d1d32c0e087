"""benchmarks/gpu_parallel.py: the prepared GPU check of the parallel axis runs its real path on the CPU (Ulysses as
gloo processes: render, parity, side-by-side timing against the twin); without CUDA the GPU run exits 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import load_benchmark


def _benchmark() -> Any:
    return load_benchmark("gpu_parallel")


@pytest.mark.slow
def test_the_cpu_run_checks_ulysses_against_its_twin_and_names_what_it_cannot(tiny_cache: Path,
                                                                              capsys: pytest.CaptureFixture) -> None:
    none, ulysses, ring = _benchmark().main(["--device", "cpu", "--options", "none,ulysses,ring", "--prompts", "1"])
    assert (none.outcome, none.max_levels) == ("ok", None)
    assert ulysses.outcome == "ok" and ulysses.max_levels is not None and ulysses.max_levels <= 2
    assert ulysses.ssim is not None and ulysses.ssim > 0.999 and ulysses.over_twin is not None
    assert ring.outcome == "not checked: it does not run on the CPU (gloo)"
    assert "% scaling efficiency" in capsys.readouterr().out


def test_without_cuda_the_gpu_run_exits_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as exited:
        _benchmark().main(["--options", "ulysses"])
    assert exited.value.code == 2 and "no CUDA device here" in capsys.readouterr().err


def test_an_unknown_option_is_named_with_the_valid_ones(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exited:
        _benchmark().main(["--options", "pipefusion"])
    assert exited.value.code == 2
    assert "--options pipefusion: valid are none, ulysses, ring, usp, tensor" in capsys.readouterr().err
