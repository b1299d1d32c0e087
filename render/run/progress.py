"""Progress that reads well wherever it goes: a tqdm bar on a terminal; elsewhere (a log file, a pipe, a Slurm
job's output) plain lines at each quarter and at the end, with no carriage returns or cursor movements (nested
tqdm bars leave `\\r` and `ESC[A` sequences in a log)."""

from __future__ import annotations

import math
import sys
from typing import Any, TextIO

from render.rundir.redact import shown


class LineProgress:
    """tqdm's update/close for a stream that is not a terminal: `<desc>: <done>/<total> <unit>` lines."""

    def __init__(self, total: int, desc: str, unit: str, stream: TextIO, steps: int = 4) -> None:
        self.total, self.desc, self.unit, self.stream = total, shown(desc), unit, stream
        self.done, self._marks, self._said = 0, {max(1, math.ceil(total * k / steps)) for k in range(1, steps + 1)}, -1
        self.postfix = ""

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        """What the bar is on now (tqdm's postfix): said after the count, e.g. the cell of an interleaved round."""
        self.postfix = shown(s)

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.done in self._marks or self.done >= self.total:
            self._say()

    def _say(self) -> None:
        if self._said != self.done:
            self._said = self.done
            postfix = f" ({self.postfix})" if self.postfix else ""
            self.stream.write(f"{self.desc}: {self.done}/{self.total} {self.unit}{postfix}\n")
            self.stream.flush()

    def close(self) -> None:
        if self.done and self._said != self.done:
            self._say()


def progress(total: int, desc: str, unit: str = "it", stream: TextIO | None = None) -> Any:
    """A progress bar on `stream` (stderr): tqdm on a terminal, else clean lines (LineProgress). Its description
    and postfix (a cell's name, as an override wrote it) reach the terminal with their control characters escaped and
    their credentials redacted (render.rundir.redact.shown)."""
    stream = stream if stream is not None else sys.stderr
    if getattr(stream, "isatty", lambda: False)():
        from tqdm import tqdm

        class Bar(tqdm):
            def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
                super().set_postfix_str(shown(s), refresh)

        return Bar(total=total, desc=shown(desc), unit=unit, leave=False, file=stream)
    return LineProgress(total, desc, unit, stream)
