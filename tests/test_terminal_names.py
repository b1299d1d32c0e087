"""Names reach the terminal without control codes (issue 61, principle 7): a cell's name is what its overrides say,
and a run folder copied from a colleague says what it likes. ESC sequences (retitle the window, move the cursor,
erase the line), C1 controls and bidirectional overrides are shown escaped, on every route to a screen."""

from __future__ import annotations

import io
import logging

import pytest

HOSTILE = "steps=2 model.id=\x1b]0;owned\x07\x1b[2K\x9b1A\u202eevil"
ESCAPED = "steps=2 model.id=\\x1b]0;owned\\x07\\x1b[2K\\x9b1A\\u202eevil"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("stream", [io.StringIO(), Terminal()], ids=["lines", "tqdm"])
def test_a_cells_name_reaches_the_progress_lines_escaped(stream: io.StringIO) -> None:
    from render.run.progress import progress

    bar = progress(total=1, desc=f"{HOSTILE} samples", unit="img", stream=stream)
    bar.set_postfix_str(HOSTILE)
    bar.update(1)
    bar.close()
    written = stream.getvalue()
    assert ESCAPED in written and "\x1b]" not in written and "\x9b" not in written and "\u202e" not in written


@pytest.mark.parametrize("stream", [io.StringIO(), Terminal()], ids=["lines", "tqdm"])
def test_a_cells_name_reaches_the_progress_lines_without_its_credentials(stream: io.StringIO) -> None:
    """Issue 61, principle 5: a cell named by an override that carries a password (a hub URL with user:password@)
    reached the terminal, and a worker's log (a submitit job's, a Ray worker's), whole in the progress lines."""
    from render.run.progress import progress

    bar = progress(total=1, desc="steps=2 model.id=https://reader:hubPassw0rd61@hub/m samples", unit="img", stream=stream)
    bar.set_postfix_str("token=hf_notarealtoken61")
    bar.update(1)
    bar.close()
    written = stream.getvalue()
    assert "hubPassw0rd61" not in written and "hf_notarealtoken61" not in written and "https://***@hub/m" in written


def test_the_render_summary_shows_a_cells_name_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    from render.app import print_summary
    from render.run.runner import CellResult
    from render.rundir import CellState

    print_summary([CellResult(Path("/tmp/run"), "abc", HOSTILE, CellState.DONE)])
    out = capsys.readouterr().out
    assert ESCAPED in out and "\x1b" not in out


def test_a_log_line_shows_a_cells_name_escaped() -> None:
    from render.rundir.redact import install

    install()
    record = logging.getLogger("render.run.runner").makeRecord("render", logging.INFO, __file__, 1,
                                                               "cell %s: 2 samples", (HOSTILE,), None)
    assert record.getMessage() == f"cell {ESCAPED}: 2 samples"


def test_every_line_assess_prints_shows_names_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from assess.cli import echo

    echo(f"{HOSTILE}\tdone\nnext line")
    assert capsys.readouterr().out == f"{ESCAPED}\tdone\nnext line\n"  # newlines and tabs kept
