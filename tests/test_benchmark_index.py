"""benchmarks/index.py runs end to end at a small size: both writers ingest the same cells, the leaderboard is read
from each, and it says whether the index's statement cache is in use."""

from __future__ import annotations

import pytest

from tests.conftest import load_benchmark


@pytest.mark.slow  # ~6 s: imports scipy's bootstrap and torchmetrics' SSIM
def test_a_small_run_prints_each_ratio_and_the_cache(capsys: pytest.CaptureFixture) -> None:
    load_benchmark("index").main(["--scores", "300", "--cells", "20", "--images", "8", "--repeats", "1"])
    out = capsys.readouterr().out
    assert "ingest ratio sqlite-utils / baseline" in out and "leaderboard ratio sqlite-utils / baseline" in out
    assert "statement cache of assess/index/writer.py active" in out
