"""A clip is one sample end to end: tiny-wan rendered through `python -m render` (its anchor too), scored frame by
frame (fidelity per frame with its worst frame, alignment over frames, temporal consistency), indexed as one sample
per clip, and shown in the report as a playing clip with a strip of frames."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from assess.cli import cli
from tests.conftest import run_render

FRAMES = 9  # tiny-wan's model.num_frames


@pytest.fixture(scope="module")
def clip_sweep(tmp_path_factory: pytest.TempPathFactory, twin_cache: Path) -> Path:
    """Two prompts of tiny-wan at 4 steps and its 16-step anchor, rendered once for this module's tests."""
    root = tmp_path_factory.mktemp("clips")
    result = run_render("model=tiny-wan", "prompts.limit=2", "steps=4", cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "outputs"


@pytest.mark.slow
def test_a_clip_is_scored_frame_by_frame_and_reported_with_player_and_strip(clip_sweep: Path, tiny_clip: Path,
                                                                           tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    scored = CliRunner().invoke(cli, ["score", str(clip_sweep), "--db", str(db), "--clip-model", str(tiny_clip),
                                      "--metrics", "psnr,ssim,clip_score,temporal_ssim", "-q"], catch_exceptions=False)
    assert scored.exit_code == 0, scored.output
    assert "scored 2 run(s), 4 sample(s)" in scored.output  # a clip is one sample, not nine
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    samples = conn.execute("SELECT * FROM samples").fetchall()
    assert len(samples) == 4 and {(r["frames"], r["fps"]) for r in samples} == {(FRAMES, 16)}
    assert all(r["s_per_frame"] == pytest.approx(r["latency_s"] / FRAMES, abs=1e-5) for r in samples)
    cell = conn.execute("SELECT cell_key FROM runs WHERE is_anchor = 0").fetchone()["cell_key"]
    scores = {(r["prompt_id"], r["metric"]): r for r in conn.execute("SELECT * FROM scores WHERE cell_key = ?", (cell,))}
    for prompt in {p for p, _ in scores}:
        for metric, first, pick in (("psnr", 0, min), ("ssim", 0, min), ("clip_score", 0, min), ("temporal_ssim", 1, min)):
            row = scores[(prompt, metric)]
            assert row["value"] is not None, row["unavailable_reason"]
            detail = json.loads(row["detail"])
            per_frame = detail["per_frame"]
            assert len(per_frame) == FRAMES - first and detail["first_frame"] == first
            assert row["value"] == pytest.approx(sum(per_frame) / len(per_frame), abs=1e-5)
            assert detail["worst"] == pick(per_frame) and per_frame[detail["worst_frame"] - first] == detail["worst"]
        assert len(set(json.loads(scores[(prompt, "psnr")]["detail"])["per_frame"])) > 1  # frames scored apart
    anchor_temporal = conn.execute("SELECT value FROM scores WHERE metric = 'temporal_ssim' AND cell_key != ?",
                                   (cell,)).fetchall()
    assert len(anchor_temporal) == 2  # the anchor has its own temporal figure: the leaderboard's delta is against it
    board = conn.execute("SELECT temporal_ssim, temporal_ssim_delta FROM leaderboard WHERE cell_key = ?", (cell,)).fetchone()
    assert board["temporal_ssim"] is not None and board["temporal_ssim_delta"] is not None

    out = tmp_path / "report"
    reported = CliRunner().invoke(cli, ["report", str(clip_sweep), "--db", str(db), "--out", str(out)],
                                  catch_exceptions=False)
    assert reported.exit_code == 0, reported.output
    html = (out / "index.html").read_text()
    assert html.count('<div class="strip"') >= 4 and 'alt="frame 9"' in html
    players = [out / src for src in set(_srcs(html)) if "__f" not in src and src.startswith("images/")]
    assert players and all(_frames_of(p) == FRAMES for p in players)  # the <img> is the whole clip: it plays


def _srcs(html: str) -> list[str]:
    import re

    return re.findall(r'<img src="([^"]+)"', html)


def _frames_of(path: Path) -> int:
    from PIL import Image

    with Image.open(path) as clip:
        return clip.n_frames


def test_an_image_model_scores_no_temporal_figure(sweep_with_anchor: Path, db: Path) -> None:
    scored = CliRunner().invoke(cli, ["score", str(sweep_with_anchor), "--db", str(db), "--metrics", "psnr,temporal_ssim",
                                      "-q"], catch_exceptions=False)
    assert scored.exit_code == 0, scored.output
    assert "temporal_ssim unavailable" not in scored.output
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM scores WHERE metric = 'temporal_ssim'").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM scores WHERE metric = 'psnr'").fetchone()[0] > 0
