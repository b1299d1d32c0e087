"""Issue 30, item 2: a band grounded in measurement. The lossless floor of a metric on a model is the drift of a
render that changes no mathematics (attention=math against the anchor's native attention) on the same prompts and
seeds; `assess floor` measures it and suggests a band as a stated multiple; every verdict shows it beside the band."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from assess.statistics.floor import lossless_difference
from assess.report.write import write_report
from assess.scoring.ingest import score
from tests.conftest import run_render

pytestmark = pytest.mark.slow  # a real render of the tiny model


def test_only_lossless_fields_make_a_sibling() -> None:
    anchor = {"model": {"name": "tiny"}, "steps": 16, "attention": {"name": "native", "backend": "native"}}
    assert lossless_difference(anchor, {**anchor, "attention": {"name": "math", "backend": "_native_math"}}) == [
        "attention=math"]
    assert lossless_difference(anchor, {**anchor, "steps": 8}) is None
    assert lossless_difference(anchor, {**anchor, "steps": 8, "attention": {"name": "math"}}) is None
    assert lossless_difference(anchor, anchor) is None


def test_assess_floor_measures_the_attention_siblings_drift_and_the_report_shows_it(tiny_cache: Path,
                                                                                     tmp_path: Path) -> None:
    result = run_render("-m", "model=tiny", "attention=math", "steps=16", "prompts.limit=4", cwd=tmp_path,
                        env_extra={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    lossy = run_render("-m", "model=tiny", "steps=4", "prompts.limit=4", cwd=tmp_path,
                       env_extra={"HF_HUB_OFFLINE": "1"})
    assert lossy.returncode == 0, lossy.stderr[-3000:]
    db = tmp_path / "index.db"
    score([tmp_path / "outputs"], db, metrics=["ssim"])
    out = CliRunner().invoke(cli, ["floor", str(tmp_path / "outputs"), "--db", str(db), "--json", "--multiple", "4"],
                             catch_exceptions=False)
    assert out.exit_code == 0, out.output
    [floor] = [f for f in json.loads(out.output) if f["metric"] == "ssim"]
    assert floor["sibling"] == "attention=math" and floor["n"] == 4 and floor["value"] >= 0
    assert floor["band"] == pytest.approx(4 * max(floor["value"], floor["high"] or 0.0))
    text = CliRunner().invoke(cli, ["floor", str(tmp_path / "outputs"), "--db", str(db)], catch_exceptions=False).output
    assert re.search(r"ssim floor \S+ .*band = 3 x floor = \S+: experiment\.quality\.band=", text), text
    sweeps = sorted((tmp_path / "outputs" / "multirun").glob("*/*"))
    html = write_report([sweeps[-1]], db, band=0.05).read_text()  # the steps=4 sweep: its verdict shows the floor
    assert "lossless floor not measured" not in html
    assert re.search(r"lossless floor [0-9.e+-]+", html)
