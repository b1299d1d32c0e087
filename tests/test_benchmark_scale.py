"""benchmarks/scale.py runs end to end at a small size: every figure of docs/scale.md's table, each command
exiting 0, the rescores counting what is current and the 1 % new scored."""

from __future__ import annotations

import pytest

from tests.conftest import load_benchmark


@pytest.mark.slow  # ~20 s: six `python -m assess` processes, each paying the imports a user's does
@pytest.mark.parametrize("shape", ["distinct", "shared"])
def test_a_small_run_prints_every_figure(capsys: pytest.CaptureFixture, shape: str) -> None:
    load_benchmark("scale").main(["--runs", "30", "--samples", "2", "--anchor-samples", "20", "--shape", shape])
    out = capsys.readouterr().out
    for label in ("score (first)", "score (nothing new)", "score (1 % new)", "status", "report", "report (again)"):
        assert f"assess {label} of 30 run folders" in out, out
    assert out.count("(exit 0)") == 6, out
    assert "0 score(s) written, 58 already current" in out  # nothing new: nothing computed
    if shape == "distinct":
        assert "2 score(s) written, 58 already current" in out  # 1 % of 30: one new run of 2 new samples
    else:  # a new run of the shared cell links its samples: nothing new to compute
        assert "0 score(s) written, 60 already current" in out
    assert out.rstrip().splitlines()[-1].startswith(f"| 30 {shape} | 78 | ")
