"""Issue 42: the main job answers its question with no flag. One shapes-model sweep, rendered once by a real
`python -m render -m ...` and scored and reported by real `assess` processes, holds every promise of the default
path: the sweep ends with a side-by-side round (its cost on its last line), the report's first screen has a verdict
per cell, side-by-side speed-ups, the band with its source and the one-sentence answer, `assess score` and `assess
status` end with the same sentence and the next command, a rerun times nothing again, and an interrupted sweep's
rerun continues in its folder (slow: real processes, about 40 s for the module)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import run_render

pytestmark = pytest.mark.slow

SWEEP = ("-m", "steps=4,16", "seed=42")  # the README's sweep on the shipped shapes model (its smoke prompts)
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def assess(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYPERGRID_INDEX": str(cwd / "outputs" / "index.db")}
    return subprocess.run([sys.executable, "-m", "assess", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


@dataclass
class Answered:
    cwd: Path
    sweep: Path
    render: subprocess.CompletedProcess
    score: subprocess.CompletedProcess
    status: subprocess.CompletedProcess
    report: subprocess.CompletedProcess


@pytest.fixture(scope="module")
def answered(tmp_path_factory: pytest.TempPathFactory) -> Answered:
    cwd = tmp_path_factory.mktemp("answered")
    render = run_render(*SWEEP, cwd=cwd, timing_round=True)
    assert render.returncode == 0, render.stderr[-3000:]
    (sweep,) = (cwd / "outputs" / "multirun").glob("*/*")
    score = assess("score", str(sweep), cwd=cwd)
    status = assess("status", str(sweep), cwd=cwd)
    report = assess("report", str(sweep), cwd=cwd)
    for done in (score, status, report):
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return Answered(cwd, sweep, render, score, status, report)


def _last_lines(result: subprocess.CompletedProcess, n: int) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.strip()][-n:]


def test_the_sweep_ends_with_a_side_by_side_round_and_the_next_command(answered: Answered) -> None:
    done, round_line, next_line = _last_lines(answered.render, 3)
    assert done.endswith("2 of 2 cells done"), f"the sweep's summary first: {done}"
    assert re.match(r"side by side: 2 cell\(s\) rendered in rounds interleaved with their anchor, so the renders are "
                    r"the timing: 6 rounds; the warm-ups and extra calls added [\d.]+ s, \d+% of the sweep's \d+ s "
                    r"\(timing.side_by_side=false skips it\)", round_line), \
        f"the sweep's renders are its rounds, their cost on its last lines: {round_line}"
    assert next_line == f"next: assess score {answered.sweep.relative_to(answered.cwd)} && assess report " \
                        f"{answered.sweep.relative_to(answered.cwd)}", f"the next command: {next_line}"
    (anchor,) = [p.parent for p in (answered.cwd / "outputs" / "anchors").rglob("run.json")]
    (session,) = [json.loads(line) for line in (anchor / "timings.jsonl").read_text().splitlines()]
    assert session["purpose"] == "sweep" and session["complete"] and len(session["samples"]) == 6, \
        "the rounds are a complete session, one per smoke prompt, recorded in the anchor's run directory"
    assert len(session["contenders"]) == 3, "the round: both cells and their anchor, in one process"
    progress = answered.render.stderr
    named = re.findall(r"^samples, interleaved: \d+/18 img \((.+)\)$", progress, re.M)
    assert named and set(named) <= {"steps=4", "steps=16", "anchor"}, \
        f"cells named as the user wrote them in the progress lines: {progress[-1500:]}"


def test_score_and_status_end_with_the_answer_and_the_next_command(answered: Answered) -> None:
    answer, then = _last_lines(answered.score, 2)
    assert answer.startswith("answer: ") and then.startswith("next: "), f"score ends with the answer: {answer}"
    assert _last_lines(answered.status, 2) == [answer, then], "status ends with the same sentence and command"
    assert "(side by side)" in answer or "undecided" in answer, f"the answer uses side-by-side figures: {answer}"
    assert "shapes_fit" in answer, f"the shapes model is judged by its own metric by default: {answer}"
    assert re.search(r"on 6 prompts", answer), f"the answer says on how many prompts: {answer}"


def test_status_json_keeps_each_verdict_with_its_band_and_source(answered: Answered) -> None:
    records = json.loads(assess("status", str(answered.sweep), "--json", cwd=answered.cwd).stdout)
    verdicts = [r["verdict"] for r in records]
    assert len(verdicts) == 2 and all(v["metric"] == "shapes_fit" and v["band"] == 0.01 for v in verdicts), \
        "a verdict under a default band is kept with that band"
    assert all(v["band_source"].startswith("model shapes's config") and v["timed"] == "side by side" for v in verdicts), \
        "and with its source and how the speed-up was timed"


def test_the_report_opens_with_verdicts_side_by_side_speedups_and_the_band_source(answered: Answered) -> None:
    html = (answered.sweep / "report" / "index.html").read_text()
    table = html[html.index('<section id="verdict">'):html.index("</section>")]
    verdicts = re.findall(r'data-verdict="([^"]+)"', table)
    assert verdicts[0] == "anchor" and len(verdicts) == 3, "a row per cell and the anchor"
    assert all(v in ("parity", "out", "undecided") for v in verdicts[1:]), f"a verdict per cell, no 'no band': {verdicts}"
    assert table.count('class="timed" title=') == 3 and table.count(">side by side</td>") == 2, \
        "every cell's speed-up is side by side"
    assert re.search(r"band ±0\.01\s*<span id=\"band-source\">from model shapes&#39;s config", table), \
        "the band and its source on the first screen"
    assert 'id="answer"' in table, "the one sentence above the table"


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install -y chromium)")
def test_the_first_1280x800_screen_holds_the_answer_and_the_table(answered: Answered, tmp_path: Path) -> None:
    from tests.assess.test_verdict_table import _browser, fits_the_first_screen

    attrs = _browser(answered.sweep / "report" / "index.html", tmp_path)
    fits_the_first_screen(attrs)
    left, top, right, bottom = (int(v) for v in attrs["data-answer-box"].split(","))
    assert 0 <= top and bottom <= 800 and right <= 1280, f"the answer on the first screen: {attrs['data-answer-box']}"
    answer = _last_lines(answered.score, 2)[0].removeprefix("answer: ")
    assert attrs["data-answer"].startswith(answer), "the report's sentence is the one score printed"
    assert attrs["data-band-source"].startswith("from model shapes's config"), attrs.get("data-band-source")


def test_a_rerun_times_nothing_again(answered: Answered) -> None:
    again = run_render(*SWEEP, cwd=answered.cwd, timing_round=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "side by side: 2 already timed (not timed again)" in again.stdout, \
        f"a rerun spends nothing on timing twice: {again.stdout[-800:]}"
    (anchor,) = [p.parent for p in (answered.cwd / "outputs" / "anchors").rglob("run.json")]
    assert len((anchor / "timings.jsonl").read_text().splitlines()) == 1, "no second session"


def test_an_interrupted_sweep_is_continued_in_its_own_folder(answered: Answered) -> None:
    """The same command after an interruption: into the interrupted sweep's folder, one sweep, complete."""
    cwd = answered.cwd
    before = set((cwd / "outputs" / "multirun").glob("*/*"))
    interrupted = run_render("-m", "steps=8,12", "seed=42", "timing.side_by_side=false", cwd=cwd)
    assert interrupted.returncode == 0, interrupted.stderr[-3000:]
    (sweep,) = set((cwd / "outputs" / "multirun").glob("*/*")) - before
    assert "side by side: not timed (timing.side_by_side=false)" in interrupted.stdout, "the round can be turned off"
    record = json.loads((sweep / "SWEEP.json").read_text())
    cell = sweep / record["cells"][1]["subdir"]
    # what Ctrl-C leaves: the second cell's last samples missing, `cancelled` recorded, the sweep's process gone
    lines = (cell / "samples.jsonl").read_text().splitlines()
    (cell / "samples.jsonl").write_text("\n".join(lines[:2]) + "\n")
    (cell / "DONE.json").unlink()
    (cell / "FAILED.json").write_text(json.dumps({"category": "cancelled", "message": "Cancelled: received SIGINT"}))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    record["pid"] = int(gone.stdout)
    (sweep / "SWEEP.json").write_text(json.dumps(record))

    rerun = run_render("-m", "steps=8,12", "seed=42", "timing.side_by_side=false", cwd=cwd)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert set((cwd / "outputs" / "multirun").glob("*/*")) - before == {sweep}, "the rerun writes into the same folder"
    assert f"continuing the interrupted sweep {sweep.relative_to(cwd)}" in rerun.stdout, "and says so"
    done = json.loads((cell / "DONE.json").read_text())
    assert (done["n_samples"], done["n_rendered"]) == (6, 4), f"only the missing samples are rendered: {done}"
    assert not (cell / "FAILED.json").exists(), "one terminal record"
    assert len(json.loads((sweep / "SWEEP.json").read_text())["cells"]) == 2, "SWEEP.json lists each cell once"
    status = assess("status", str(sweep), cwd=cwd)
    assert "2 cell(s): 2 done" in status.stdout, f"one sweep, complete: {status.stdout[-800:]}"
