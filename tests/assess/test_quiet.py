"""Issue 30, item 7: quiet output. One line per metric that cannot score a run (with the count), torch's _pytree
deprecation filtered at the entry points (and nothing else), progress that writes clean lines off a terminal."""

from __future__ import annotations

import io
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from click.testing import CliRunner

from assess.cli import cli
from assess.metrics import clipmodels
from assess.metrics.base import SetupProblem
from assess.scoring.ingest import score
from assess.scoring.tally import ScoreSummary
from render.run.progress import LineProgress, progress
from tests.assess.conftest import RunFactory, make_cell, shift


def test_a_metric_that_cannot_score_real_prompts_says_so_once(shapes_outputs: RunFactory, db: Path) -> None:
    outputs = shapes_outputs  # the shapes model, given prompts outside its grammar
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor", overrides=["steps=28"], latency=0.2)
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(2), latency=0.1)
    summary = score([sweep], db, metrics=["ssim", "shapes"])
    shapes = [line for line in summary.lines() if "shapes" in line]
    n = sum(n for (metric, _), n in summary.unavailable.items() if metric == "shapes")
    assert len({reason for metric, reason in summary.unavailable if metric == "shapes"}) > 1  # one reason per prompt
    assert len(shapes) == 1 and shapes[0].startswith(f"  shapes unavailable for {n} sample(s): ")
    assert "other reason(s) like it" in shapes[0]


def _pytree_warning() -> None:
    import torch.utils._pytree as pytree

    class Box:  # a fresh class each time: torch refuses to register one twice
        pass

    pytree._register_pytree_node(Box, lambda b: ([], None), lambda values, context: Box())


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["assess", "render"])
def test_the_entry_points_filter_torchs_pytree_warning_and_nothing_else(entry: str) -> None:
    """Each entry point run for real (`--help`), then torch's deprecated call made in the same process."""
    main = "from assess.cli import main" if entry == "assess" else "from render.__main__ import main"
    code = (f"import sys, warnings\nwarnings.simplefilter('default')\n{main}\nsys.argv = ['x', '--help']\n"
            "try:\n    main()\nexcept (SystemExit, Exception):\n    pass  # python -c hides render's config folder from Hydra\n"
            "from tests.assess.test_quiet import _pytree_warning\n_pytree_warning()\n"
            "warnings.warn('a warning of our own', FutureWarning)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "_register_pytree_node" not in result.stderr
    assert "a warning of our own" in result.stderr  # a filter by message, not a silenced category


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["assess", "render", None])
def test_torchaos_logged_enum_warning_is_dropped_at_the_entry_points_only(entry: str | None) -> None:
    """torchao's import logs "<enum ...> is an Enum subclass ..." through torch's `_pytree` logger (a render of a
    quantizing pipeline imports it): dropped by message at the entry points, shown without them; torch's other
    records of that logger still show."""
    main = "" if entry is None else (
        f"from {'assess.cli' if entry == 'assess' else 'render.__main__'} import main\nsys.argv = ['x', '--help']\n"
        "try:\n    main()\nexcept (SystemExit, Exception):\n    pass\n")
    code = (f"import sys, logging\n{main}import torchao\n"
            "logging.getLogger('torch.utils._pytree').warning('another record of that logger')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr[-2000:]
    assert ("is an Enum subclass" in result.stderr) == (entry is None)
    assert "another record of that logger" in result.stderr


def test_without_the_entry_point_the_warning_shows() -> None:
    """The route the filter closes is real: torch's call warns when no entry point filtered it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _pytree_warning()
    assert any("_register_pytree_node" in str(w.message) for w in caught)


def test_progress_off_a_terminal_writes_clean_lines() -> None:
    out = io.StringIO()
    bar = progress(total=10, desc="abcd1234 samples", unit="img", stream=out)
    assert isinstance(bar, LineProgress)
    for _ in range(10):
        bar.update(1)
    bar.close()
    text = out.getvalue()
    assert "\r" not in text and "\x1b" not in text
    assert text.splitlines() == [f"abcd1234 samples: {n}/10 img" for n in (3, 5, 8, 10)]


@pytest.mark.slow
def test_a_render_off_a_terminal_leaves_no_control_sequences(tiny_cache: Path, tmp_path: Path) -> None:
    from tests.conftest import run_render

    result = run_render("-m", "model=tiny", "steps=1,2", "prompts.limit=2", cwd=tmp_path,
                        env_extra={"HF_HUB_OFFLINE": "1"})  # a sweep: the launcher's bar around the cells' bars
    assert result.returncode == 0, result.stderr[-2000:]
    assert "\r" not in result.stderr and "\x1b[A" not in result.stderr
    assert "samples: 2/2 img" in result.stderr and "cells: 2/2 cell" in result.stderr


def test_the_metrics_this_machine_cannot_run_share_one_line_with_their_fixes() -> None:
    """Issue 42, item 5: a model not at hand offline and a missing package are named in one line with each fix;
    a reason that is the samples' own keeps its line; -v gives every metric its own line again."""
    offline = "--metric-model METRIC=<local folder>"
    summary = ScoreSummary(runs=1, samples=4)
    for metric in ("pickscore", "clip_score"):
        summary.unavailable[(metric, SetupProblem(f"{metric}'s model could not be loaded (OSError: ...)",
                                                  "model not in the local cache, hub unreachable", offline))] = 4
    summary.unavailable[("lpips", SetupProblem("LPIPS needs torchvision ...", "torchvision not installed", "`pip x`"))] = 2
    summary.unavailable[("shapes", "no shape named in the prompt 'a cat'")] = 4
    lines = summary.lines()
    assert lines[1:] == [
        "  3 metric(s) unavailable on this machine: clip_score, pickscore (model not in the local cache, hub "
        f"unreachable: {offline}); lpips (torchvision not installed: `pip x`); -v gives each reason",
        "  shapes unavailable for 4 sample(s): no shape named in the prompt 'a cat'"]
    detail = summary.lines(verbose=True)[1:]
    assert [line.split(" unavailable")[0] for line in detail] == ["  clip_score", "  lpips", "  pickscore", "  shapes"]
    assert "clip_score's model could not be loaded (OSError: ...)" in detail[0]


def _score_cli(*args: str) -> str:
    result = CliRunner().invoke(cli, ["score", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.slow  # the first score of a process imports torch, transformers' CLIP: about 8 s
def test_assess_score_names_models_not_at_hand_offline_in_one_line_and_v_gives_each_reason(
        outputs: RunFactory, db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real loading path, offline: two hub ids that are not cached share the line (a folder of the user's that
    holds no model is refused before anything is scored, exit 2: issue 45, tests/assess/test_cli.py)."""
    from render.run.quiet import VERBOSE_ENV

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(VERBOSE_ENV, raising=False)  # -v sets it for the processes it starts: undone after the test
    monkeypatch.setattr(clipmodels, "_LOADED", {})
    sweep = outputs.sweep()
    outputs.anchor(sweep, "0_anchor")
    outputs.run(sweep, "1_steps=8", make_cell(steps=8), overrides=["steps=8"], perturb=shift(3))
    args = (str(sweep), "--db", str(db), "--metrics", "clip_score,pickscore", "--clip-model",
            "hypergrid-test/no-such-clip", "--metric-model", "pickscore=hypergrid-test/no-such-pickscore")
    lines = _score_cli(*args).splitlines()
    [one] = [line for line in lines if "unavailable on this machine" in line]
    assert one.startswith("  2 metric(s) unavailable on this machine: clip_score, pickscore (model not in the local "
                          "cache, hub unreachable: --metric-model METRIC=<local folder>)")
    assert not any(line.startswith(("  clip_score unavailable", "  pickscore unavailable")) for line in lines)
    detail = _score_cli(*args, "--force", "-v")
    assert "unavailable on this machine" not in detail
    assert "  clip_score unavailable for" in detail and "'hypergrid-test/no-such-clip' could not be loaded" in detail
    assert "  pickscore unavailable for" in detail and "--metric-model pickscore=<local folder>" in detail
