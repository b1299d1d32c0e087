"""Issue 42, the pieces of the default path in-process: the answer's sentence, the band's order of trust, the cells'
names, the timing round's choices and line, and which earlier sweep a rerun continues (the real processes:
tests/test_default_answer.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from omegaconf import OmegaConf

from assess.verdicts.answer import next_render, prompts_to_decide, sentence
from assess.verdicts.default_rule import COMMAND_LINE, choose_band, choose_metric
from assess.statistics.floor import Floor
from render.errors import ConfigError
from render.rundir import cell_label
from render.run.measure import check_timing
from render.timing.sweep_round import RoundOutcome, skip_reason


def _row(label: str, verdict: str, speed: float, timed: str = "side by side", n: int = 4,
         needed: int | None = None) -> dict[str, Any]:
    return {"label": label, "verdict": verdict, "speedup": f"{speed:.2f}× [{speed - 1:.2f}, {speed + 1:.2f}]",
            "speed_value": speed, "timed": timed, "is_anchor": False, "n_prompts": n, "needed": needed}


def _table(*rows: dict[str, Any], band: float | None = 0.01) -> dict[str, Any]:
    anchor = {"label": "anchor", "verdict": "anchor", "is_anchor": True}
    return {"rows": [anchor, *rows], "band": band, "metrics": ["shapes_fit"], "rule": "no parity band given"}


def test_the_answer_names_the_fastest_cell_at_parity_side_by_side_first() -> None:
    answer = sentence(_table(_row("steps=16", "parity", 2.0), _row("steps=8", "parity", 4.0, timed="timed apart"),
                             _row("steps=4", "out", 8.0)), "smoke", "S")
    assert answer.text.startswith("Fastest at parity: steps=16, 2.00× [1.00, 3.00] (side by side)"), answer.text
    assert "on 4 prompts" in answer.text and answer.next == "assess report S"


def test_a_faster_undecided_cell_gets_the_command_that_decides_it() -> None:
    answer = sentence(_table(_row("steps=16", "parity", 2.0), _row("steps=8 cache=fbcache", "undecided", 4.0, needed=28),
                             _row("steps=4 cache=none", "undecided", 7.0, needed=12)), "smoke")
    assert "2 faster cell(s) undecided on 4 prompts; about 28 prompts would decide them" in answer.text, answer.text
    assert answer.next == "python -m render -m steps=8,4 cache=fbcache,none prompts=dev"


def test_a_speed_up_whose_interval_reaches_one_is_not_called_sure_and_retime_is_the_next_command() -> None:
    # the README's sweep on a machine where one round of six hit a burst of load: 1.62× [0.17, 2.02] side by side
    unsure = {**_row("steps=16 cache=none", "parity", 1.62), "speedup": "1.62× [0.17, 2.02]", "speed_low": 0.17}
    answer = sentence(_table(unsure, _row("steps=4", "out", 7.0)), "smoke", "S")
    assert "Not yet surely faster: its interval reaches 0.17× (`assess retime S` times more rounds" in answer.text, \
        answer.text
    assert answer.next == "assess retime S"
    faster = sentence(_table(unsure, _row("steps=8", "undecided", 3.0, needed=40)), "smoke", "S")
    assert "Not yet surely faster" in faster.text and faster.next.startswith("python -m render -m steps=8"), faster
    sure = sentence(_table({**unsure, "speed_low": 1.3}), "smoke", "S")
    assert "surely" not in sure.text and sure.next == "assess report S", sure
    apart = sentence(_table({**unsure, "timed": "timed apart (±173 %)", "speed_low": 0.5}), "smoke", "S")
    assert "surely" not in apart.text and "`assess retime` times it side by side" in apart.text, apart


@pytest.mark.parametrize("rows,band,starts,command", [
    ((_row("steps=4", "undecided", 7.0),), 0.01, "No cell at parity yet: 1 cell(s) undecided on 4 prompts",
     "python -m render -m steps=4 prompts=dev"),
    ((_row("steps=4", "out", 7.0), _row("steps=2", "out", 9.0)), 0.01, "No cell of this sweep is at parity",
     "assess report S --band B"),
    ((_row("steps=4", "no band", 7.0),), None, "No verdict: no parity band", "assess report S --band B"),
    ((), 0.01, "No cell to judge yet", "assess score S"),
])
def test_without_a_cell_at_parity_the_answer_says_why_and_what_next(rows: tuple, band: float | None, starts: str,
                                                                     command: str) -> None:
    answer = sentence(_table(*rows, band=band), "smoke", "S")
    assert answer.text.startswith(starts) and answer.next == command, answer


def test_more_prompts_of_a_larger_split_or_more_seeds() -> None:
    rows = [_row("steps=4", "undecided", 7.0)]
    assert next_render(rows, "dev").endswith("steps=4 seed=[0,1]")
    assert next_render(rows, "smoke").endswith("steps=4 prompts=dev")


def test_prompts_to_decide_grows_as_the_mean_nears_the_band() -> None:
    near = prompts_to_decide([-0.002, -0.012, -0.004, -0.01], 0.01, True, 0.05)
    far = prompts_to_decide([0.002, 0.006, -0.002, 0.004], 0.01, True, 0.05)
    assert near is not None and far is not None and near > far >= 5
    assert prompts_to_decide([-0.02, -0.03, -0.025], 0.01, True, 0.05) is None, "past the band: no count decides"
    assert prompts_to_decide([0.02, 0.03, 0.025], 0.01, False, 0.05) is None, "lower is better: the sign turns"


def test_the_band_comes_from_the_command_line_then_a_floor_then_the_model_then_the_metric() -> None:
    floor = Floor("ssim", 0.004, 0.005, 4, "attention=math", "a" * 16)
    parity = {"metric": "shapes_fit", "band": 0.01, "source": "docs/shapes.md"}
    assert choose_band("shapes_fit", 0.2, {}, "shapes", parity) == (0.2, COMMAND_LINE)
    assert choose_band("ssim", None, {"ssim": floor}, "shapes", parity) == (
        0.015, "3 × the lossless floor measured on attention=math (assess floor)")
    assert choose_band("shapes_fit", None, {"ssim": floor}, "shapes", parity) == (
        0.01, "model shapes's config: docs/shapes.md")
    band, source = choose_band("ssim", None, {}, "tiny", {})
    assert band == 0.05 and source.startswith("ssim's documented default")
    assert choose_band("psnr", None, {}, "tiny", {}) == (None, ""), "PSNR has no band around the anchor's own value"
    zero = Floor("ssim", 0.0, 0.0, 4, "attention=math", "a" * 16)
    assert choose_band("ssim", None, {"ssim": zero}, "tiny", {})[0] == 0.05, "a floor of 0 is no band"


def test_the_metric_is_the_models_own_when_its_cells_have_it() -> None:
    valid = ["ssim", "psnr", "shapes_fit"]
    assert choose_metric(None, {"metric": "shapes_fit"}, ["ssim", "shapes_fit"], valid) == "shapes_fit"
    assert choose_metric(None, {"metric": "shapes_fit"}, ["ssim"], valid) == "ssim", "not scored: the first it has"
    assert choose_metric("psnr", {"metric": "shapes_fit"}, ["ssim", "shapes_fit"], valid) == "psnr"


def test_a_cell_is_named_by_its_own_overrides() -> None:
    assert cell_label(["steps=8", "cache=fbcache", "seed=42", "prompts=dev", "prompts.limit=4", "out_root=o"]) == \
        "steps=8 cache=fbcache"
    assert cell_label(["model=shapes", "steps=32"], is_anchor=True) == "anchor"
    assert cell_label(["seed=[0,1]"]) == "defaults"
    assert cell_label(["+cache.threshold=0.1", "hydra/launcher=gpus", "timing.repeats=3"]) == "+cache.threshold=0.1"


def _jobs(**timing: Any) -> list[Any]:
    return [SimpleNamespace(timing=check_timing(timing or None), experiment=None)]


def test_the_round_runs_where_the_sweep_rendered_and_says_why_when_not() -> None:
    assert skip_reason(_jobs(), "InProcessLauncher", True) is None
    assert skip_reason(_jobs(), "GpusLauncher", True) is None
    assert skip_reason(_jobs(side_by_side=False), "InProcessLauncher", True) == "timing.side_by_side=false"
    assert "SLURM" in (skip_reason(_jobs(), "SlurmLauncher", True) or "")
    assert skip_reason(_jobs(), "SlurmLauncher", False) is not None
    experiment = [SimpleNamespace(timing=check_timing(None), experiment=SimpleNamespace(name="demo"))]
    assert "climb" in (skip_reason(experiment, "InProcessLauncher", True) or "")


def test_the_rounds_line_says_what_it_cost_and_how_to_turn_it_off() -> None:
    session = SimpleNamespace(rounds=12)
    line = RoundOutcome(sessions=[session], timed=["steps=4", "steps=8"], spent_s=3.0).line(Path("S"), 20.0)  # type: ignore[list-item]
    assert line == ("side by side: 2 cell(s) timed against their anchor in one process, 12 rounds, 3.0 s, 15% of the "
                    "sweep's 20 s (timing.side_by_side=false skips it)")
    off = RoundOutcome(skipped="timing.side_by_side=false").line(Path("S"), 20.0)
    assert off == "side by side: not timed (timing.side_by_side=false); the speed-ups stay timed apart until `assess retime S`"
    left = RoundOutcome(left_out=["steps=4 parallel=ulysses: a parallel cell is timed with its ranks"]).line(Path("S"), 9)
    assert "1 left out (steps=4 parallel=ulysses: a parallel cell is timed with its ranks): `assess retime S`" in left


@pytest.mark.parametrize("share", [0, 1.5, -0.1, True, "x"])
def test_a_bad_share_is_refused_naming_the_valid_range(share: Any) -> None:
    with pytest.raises(ConfigError, match=r"timing.side_by_side_share=.*\(0, 1\]"):
        check_timing({"side_by_side_share": share})


@pytest.mark.parametrize("parity,match", [({"metric": "fid"}, "model.parity.metric=fid: not a quality metric"),
                                          ({"band": -1.0}, r"model.parity.band=-1.0: must be a positive")])
def test_a_bad_model_parity_is_refused(parity: dict[str, Any], match: str) -> None:
    from render.cell import check_parity

    model = OmegaConf.create({"parity": {"metric": None, "band": None, "source": "", **parity}})
    with pytest.raises(ConfigError, match=match):
        check_parity(model)


def _sweep(root: Path, name: str, cells: list[tuple[int, list[str], str]], pid: int, done: bool = False) -> Path:
    from render.rundir import now_iso

    folder = root / "multirun" / "2026-12-05" / name
    folder.mkdir(parents=True)
    started = now_iso() if pid == os.getpid() else f"2026-12-05T{name[:8].replace('-', ':')}+00:00"
    record = {"launcher": "InProcessLauncher", "started_at": started,
              "host": __import__("socket").gethostname(), "pid": pid,
              "cells": [{"num": n, "overrides": o, "subdir": f"{n}_x", "cell_key": k, "describe": "",
                         "expected_samples": 4} for n, o, k in cells]}
    (folder / "SWEEP.json").write_text(json.dumps(record))
    for n, _, _ in cells:
        (folder / f"{n}_x").mkdir()
        if done:
            (folder / f"{n}_x" / "DONE.json").write_text("{}")
    return folder


def test_a_rerun_continues_the_newest_interrupted_sweep_of_the_same_cells(tmp_path: Path) -> None:
    from hydra_plugins.hypergrid.resume import interrupted

    gone = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    cells = [(0, ["steps=4"], "k4"), (1, ["steps=8"], "k8")]
    jobs = [SimpleNamespace(cell=SimpleNamespace(key=k)) for _, _, k in cells]
    overrides = [o for _, o, _ in cells]
    mine = tmp_path / "multirun" / "2026-12-05" / "12-00-00-aaaa"
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(mine)}, "overrides": {"hydra": []}}})

    assert interrupted(config, overrides, jobs) is None, "nothing to continue"
    _sweep(tmp_path, "09-00-00-old1", cells, gone)
    newest = _sweep(tmp_path, "10-00-00-old2", cells, gone)
    _sweep(tmp_path, "11-00-00-live", cells, os.getpid())  # its process still runs it
    _sweep(tmp_path, "11-10-00-done", cells, gone, done=True)  # finished: a rerun is a sweep of its own
    _sweep(tmp_path, "11-20-00-othr", [(0, ["steps=4"], "k4")], gone)  # other cells
    assert interrupted(config, overrides, jobs) == newest
    given = OmegaConf.create({"hydra": {"sweep": {"dir": str(mine)}, "overrides": {"hydra": ["hydra.sweep.dir=x"]}}})
    assert interrupted(given, overrides, jobs) is None, "a sweep folder the user gave is theirs"


def test_a_sweep_whose_jobs_still_run_is_not_continued(tmp_path: Path) -> None:
    """The gpus launcher's jobs are local processes: one alive keeps its sweep from being continued."""
    from hydra_plugins.hypergrid.resume import interrupted

    gone = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    cells = [(0, ["steps=4"], "k4")]
    folder = _sweep(tmp_path, "09-00-00-gpus", cells, gone)
    record = json.loads((folder / "SWEEP.json").read_text())
    (folder / "SWEEP.json").write_text(json.dumps({**record, "launcher": "GpusLauncher"}))
    (folder / "JOBS.json").write_text(json.dumps([{"job_id": str(os.getpid()), "cells": []}]))
    mine = tmp_path / "multirun" / "2026-12-05" / "12-00-00-aaaa"
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(mine)}, "overrides": {"hydra": []}}})
    jobs = [SimpleNamespace(cell=SimpleNamespace(key="k4"))]
    assert interrupted(config, [["steps=4"]], jobs) is None, "a job of it still runs"
    (folder / "JOBS.json").write_text(json.dumps([{"job_id": str(gone), "cells": []}]))
    assert interrupted(config, [["steps=4"]], jobs) == folder, "its jobs are gone too: continued"


def test_the_models_parity_is_the_first_readable_runs_record_else_its_config_today(tmp_path: Path) -> None:
    from assess.verdicts.default_rule import model_parity
    from render import rundir

    def run(folder: str, model: dict[str, Any] | None) -> str:
        record = rundir.RunRecord(3, "k", {}, rundir.AnchorRef("a"), False, rundir.PromptsRef("dev", ("p",)), (0,),
                                  config={} if model is None else {"model": model})
        rundir.atomic_write_json(tmp_path / folder / "run.json", record.as_dict())
        return str(tmp_path / folder)

    own = {"metric": "ssim", "band": 0.02, "source": "measured"}
    first = [str(tmp_path / "unreadable"), run("recorded", {"name": "no-such-model", "parity": own}),
             run("later", {"name": "shapes"})]
    assert model_parity(first) == ("no-such-model", own)  # as recorded, though no such config composes today
    shapes = model_parity([run("old", {"name": "shapes"})])  # rendered before models had one: shapes' config today
    assert shapes[0] == "shapes" and (shapes[1]["metric"], shapes[1]["band"]) == ("shapes_fit", 0.01)
    assert model_parity([run("nameless", {"dtype": "float32"})]) == ("", {})
    assert model_parity([run("no-model", None)]) == ("", {})
    assert model_parity([str(tmp_path / "unreadable")]) == ("", {})
