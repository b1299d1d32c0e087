"""hypergrid as a library: take a verdict to your own pipeline (docs/production.md).

    import hypergrid
    applied = hypergrid.apply(pipe, "outputs/reports/<sweep>/winner.yaml")  # or a run folder, or "model=... steps=4"
    image = pipe(**applied.call_kwargs("a red circle", seed=0)).images[0]
    report = hypergrid.verify(pipe, "winner.yaml")  # its judged samples rendered again, timed against the anchor

The levers are applied by the renderer's own code (render.axes.configure), the call's arguments are the renderer's
(render.run.loader.call_kwargs). The command-line tools (`python -m render`, `assess`) stay as they are. Importing
hypergrid imports no torch: each function imports what it needs when it runs.
"""

from __future__ import annotations

from assess.winner.apply import Applied, VersionWarning, WinnerRefused, apply, load
from assess.winner.contract import JudgedSample, Winner, WinnerFileError, read_winner
from assess.winner.verify import Verification, verify

__all__ = ["Applied", "JudgedSample", "VersionWarning", "Verification", "Winner", "WinnerFileError", "WinnerRefused",
           "apply", "load", "read_winner", "verify"]
