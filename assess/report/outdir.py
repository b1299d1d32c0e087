"""Folders that assess writes whole (a report): new, or its own, never anything else; replaced atomically.

A folder written here carries a marker file (MARKER). Before anything is written, a folder that exists and
holds anything is refused unless it carries the marker (or is a report written before the marker existed:
only index.html, pareto.png / frontier.png and images/, the page one of ours). The new contents are written
aside, in a sibling temporary folder, then swapped in with two renames; a failure on the way (a full disk)
removes the temporary folder and leaves the previous report whole.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from assess.errors import AssessError

MARKER = ".hypergrid-owned"
_LEGACY = {"index.html", "pareto.png", "frontier.png", "images"}


class ForeignFolder(AssessError):
    """An output folder that holds something hypergrid did not write there."""


def owned(folder: Path) -> bool:
    """True when hypergrid wrote this folder (its marker, or a report of a version before the marker)."""
    if (folder / MARKER).is_file():
        return True
    names = {p.name for p in folder.iterdir()}
    if not names or not names <= _LEGACY or "index.html" not in names:
        return False
    try:
        with open(folder / "index.html", encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return False
    return "<title>hypergrid" in head


def check_out(folder: Path, what: str = "report") -> None:
    """Refuse, before anything is written, a folder that is a file or holds what hypergrid did not write."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise ForeignFolder(f"--out {folder}: not a folder (a file or a link): give a new folder for the {what}")
    above = next((p for p in folder.parents if p.exists()), None)
    if above is not None and not above.is_dir():  # --out under a file
        import errno

        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(above))
    if folder.is_dir() and any(folder.iterdir()) and not owned(folder):
        raise ForeignFolder(f"--out {folder}: the folder holds files that hypergrid did not write; the {what} "
                            f"replaces its whole folder, so it writes only into a new or empty folder or one of its "
                            f"own {what}s (marked {MARKER}): give another --out, e.g. {folder / what}")


@contextmanager
def staged(folder: Path, what: str = "report") -> Iterator[Path]:
    """Yield a temporary folder beside `folder` to write into; on a clean exit it replaces `folder` (checked with
    `check_out` first), on an error it is removed and `folder` is left as it was."""
    folder = folder.absolute()
    check_out(folder, what)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
    try:
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes 0700; a report is read by colleagues
        (staging / MARKER).write_text(json.dumps({"written_by": "hypergrid", "kind": what}) + "\n")
        yield staging
        check_out(folder, what)  # something may have been put there while the report was written
        swap(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def swap(staging: Path, folder: Path) -> None:
    """Put `staging` in `folder`'s place with two renames; the old one is removed after (restored on a failure)."""
    if not folder.exists():
        os.rename(staging, folder)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old-", dir=folder.parent))
    os.rename(folder, old / folder.name)
    try:
        os.rename(staging, folder)
    except OSError:
        os.rename(old / folder.name, folder)
        os.rmdir(old)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
