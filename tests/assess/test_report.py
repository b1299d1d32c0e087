"""`assess report`: the HTML folder, its contents, and how it loads in a real browser."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from assess.errors import NotScored
from assess.report.write import write_report
from assess.statistics.compare import pareto_front
from assess.scoring.ingest import score
from tests.assess.conftest import ANCHOR_KEY, RunFactory, make_cell, noise, shift

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


class Parsed(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []
        self.rows: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "img":
            self.images.append(a["src"])
        elif tag == "a":
            self.links.append(a["href"])
        elif tag == "tr" and "data-cell-key" in a:
            self.rows.append(a)


@pytest.fixture
def grid(outputs: RunFactory) -> Path:
    """A 2 x 2 sweep (steps x cache) with its anchor in the same sweep, and one failure."""
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor", overrides=["steps=28", "cache=none"], latency=0.2)
    n = 1
    for steps in (8, 16):
        for cache in ("none", "fbcache"):
            outputs.run(sweep, f"{n}_steps={steps},cache={cache}", make_cell(steps=steps, cache=cache),
                        overrides=[f"steps={steps}", f"cache={cache}"], perturb=shift(28 - steps) if cache == "none"
                        else noise(28 - steps), latency=0.2 * steps / 28 * (0.7 if cache == "fbcache" else 1))
            n += 1
    outputs.run(sweep, f"{n}_steps=2,cache=none", make_cell(steps=2), overrides=["steps=2", "cache=none"],
                terminal="failed", category="non-finite-output", n_done=0)
    return sweep


@pytest.fixture
def report(grid: Path, db: Path) -> Path:
    score([grid], db, metrics=["psnr", "ssim"])
    return write_report([grid], db)


def parse(path: Path) -> Parsed:
    parsed = Parsed()
    parsed.feed(path.read_text())
    return parsed


def test_report_folder_is_self_contained(report: Path, grid: Path) -> None:
    assert report == grid / "report" / "index.html"
    parsed = parse(report)
    assert "pareto.png" in parsed.images
    assert len(parsed.images) > 10
    for src in parsed.images:
        assert not src.startswith(("/", "file:", "http")), src
        assert (report.parent / src).is_file(), src
    moved = report.parent.parent / "moved-report"
    shutil.copytree(report.parent, moved)
    assert all((moved / src).is_file() for src in parsed.images)


def test_leaderboard_rows_and_anchor_marking(report: Path) -> None:
    parsed = parse(report)
    keys = [r["data-cell-key"] for r in parsed.rows]
    assert keys[0] == ANCHOR_KEY and parsed.rows[0]["class"] == "anchor"
    assert all(r["class"] == "" for r in parsed.rows[1:])
    assert len(keys) == 6 and len(set(keys)) == 6
    html = report.read_text()
    assert "★ anchor: steps=28 cache=none" in html
    assert re.search(r"\d+(\.\d+)? \[\d+(\.\d+)?, \d+(\.\d+)?\]×", html), "speed-up with its interval"


def test_contact_sheets_one_per_swept_axis(report: Path) -> None:
    html = report.read_text()
    assert set(re.findall(r'<table class="sheet" data-axis="([^"]+)"', html)) == {"cache", "steps"}


def test_failures_table_points_at_the_traceback(report: Path, grid: Path) -> None:
    html = report.read_text()
    assert "non-finite-output" in html
    failed_record = grid / "5_steps=2,cache=none" / "FAILED.json"
    assert str(failed_record) in html
    link = [href for href in parse(report).links if href.endswith("FAILED.json")]
    assert link and (report.parent / link[0]).resolve() == failed_record


def test_report_of_an_unscored_sweep_says_what_to_run(grid: Path, db: Path, outputs: RunFactory) -> None:
    score([grid / "0_anchor"], db, metrics=["psnr"])
    other = outputs.sweep("2026-12-01/09-00-00-cafe")
    outputs.run(other, "0_steps=8", make_cell(steps=8), overrides=["steps=8"])
    with pytest.raises(NotScored) as err:
        write_report([other], db)
    assert str(err.value) == (f"none of the 1 run(s) under {other} are in the index {db}: "
                              f"run `assess score {other}` first")


def test_rewriting_a_report_replaces_it(report: Path, grid: Path, db: Path) -> None:
    stale = report.parent / "stale.txt"
    stale.write_text("x")
    again = write_report([grid], db)
    assert again == report and not stale.exists()
    assert [p.name for p in grid.iterdir() if p.name.startswith(".report")] == []


def test_pareto_front() -> None:
    points = [(1.0, 0.9), (2.0, 0.8), (3.0, 0.5), (2.5, 0.4), (0.5, 0.95), (1.5, 0.7)]
    assert pareto_front(points) == [0, 1, 2, 4]
    assert pareto_front([(1.0, 0.1), (2.0, 0.3), (0.5, 0.05)], maximize=(True, False)) == [0, 1, 2]
    assert pareto_front([(1.0, 0.5), (1.0, 0.5), (0.5, 0.4)]) == [0, 1]  # equal points are both kept
    assert pareto_front([(0.2, 0.1), (0.1, 0.1)], maximize=(False, True)) == [1]  # lower latency wins


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install -y chromium)")
def test_report_loads_in_a_headless_browser(report: Path, tmp_path: Path) -> None:
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,900", "--virtual-time-budget=10000"]
    dom = subprocess.run([*flags, "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", dom.stdout)
    assert body, dom.stdout[:2000]
    attrs = dict(re.findall(r'(data-[\w-]+)="([^"]*)"', body.group(1)))
    assert attrs.get("data-ready") == "true", attrs
    assert attrs["data-errors"] == "0", attrs["data-error-list"]
    assert int(attrs["data-images"]) == len(parse(report).images) > 10
    assert attrs["data-images-loaded"] == attrs["data-images"]
    assert int(attrs["data-page-width"]) <= 1280, "the page is wider than a 1280-px window (the leaderboard scrolls inside)"
    shot = tmp_path / "report.png"
    run = subprocess.run([*flags, f"--screenshot={shot}", report.as_uri()], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and shot.stat().st_size > 10_000


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install -y chromium)")
def test_the_browser_check_catches_a_broken_image(report: Path, tmp_path: Path) -> None:
    """The check itself can fail: remove one copied image and it must say so."""
    victim = next((report.parent / "images").rglob("*.png"))
    victim.unlink()
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'p'}",
             "--virtual-time-budget=10000", "--dump-dom", report.as_uri()]
    dom = subprocess.run(flags, capture_output=True, text=True, timeout=120).stdout
    attrs = dict(re.findall(r'(data-[\w-]+)="([^"]*)"', re.search(r"<body([^>]*)>", dom).group(1)))
    rel = victim.relative_to(report.parent).as_posix()
    refs = sum(1 for src in re.findall(r'<img[^>]*\ssrc="([^"]*)"', dom) if src.endswith(rel))
    assert refs >= 1  # a sheet may show one copied image more than once (the contact sheet, "where it breaks")
    assert int(attrs["data-images-loaded"]) == int(attrs["data-images"]) - refs
    assert attrs["data-errors"] == str(refs) and victim.name in attrs["data-error-list"]


def test_hostile_names_are_escaped(outputs: RunFactory, db: Path) -> None:
    sweep = outputs.sweep()
    outputs.anchor(sweep)
    outputs.run(sweep, "1_prompt=a'; echo foo", make_cell(steps=8), overrides=["steps=8", "tag=<b>bold</b>"],
                perturb=shift(3))
    score([sweep], db, metrics=["psnr"])
    html = write_report([sweep], db).read_text()
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
