"""The cyclic garbage collector paused while a command builds a large, long-lived, acyclic heap.

A report of 5,000 cells holds every cell's index rows (100,000 samples and as many scores, read at once:
assess.report_index), views and statistics until it ends: millions of dicts, lists and floats, none of them in a
reference cycle, all freed by their reference counts. The collector cannot know that: each time enough objects
have been allocated it walks them all again, 14 full collections and about 2 s of a 12 s report. Paused, it walks
none of them; the few cycles a report does make (matplotlib's figure) wait until it runs again, after.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off inside (reference counting still frees what is dropped), as it was after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
