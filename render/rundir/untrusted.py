"""A run folder is untrusted input: what it records is data, never a path or a name to take as given.

Engineers score and report run folders that colleagues copied to them. So every path read from a run
folder goes through `relative_path` (when it is parsed: relative, no `..`) and `inside` (when it is opened:
resolved, symlinks followed, still inside the folder), and every recorded value that becomes a file name
goes through `safe_component`. docs/run-directory.md says what is trusted and what is not.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path, PurePosixPath

from render.rundir.errors import RunDirError

_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]")
MAX_COMPONENT = 96


class UnsafePath(RunDirError, OSError):
    """A path a run folder records that leaves the folder (absolute, `..`, a symlink out of it). An OSError, so a
    reader that treats an unreadable image as unavailable does the same with this one."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unsafe path"


def relative_path(value: object, what: str = "path") -> str:
    """A path a record gives relative to its run folder, as recorded; UnsafePath when it is absolute, empty,
    has a `..` part, a backslash or a NUL."""
    text = str(value)
    parts = PurePosixPath(text).parts
    if not text or text.startswith("/") or "\\" in text or "\0" in text or ".." in parts or (
            parts and parts[0].endswith(":")):
        raise UnsafePath(f"{what} {text!r} is not a path inside its run folder (relative, without '..')")
    return text


def contained(folder: Path | str, relative: Path | str, what: str = "file") -> Path:
    """`folder / relative`, resolved (symlinks followed), when it lies inside `folder` (resolved); else UnsafePath.
    A symlink in a run folder that points out of it is refused, never followed to its bytes. Fast on the common
    path (no `..`, no symlink below the folder): one lstat per part of `relative`, the folder's own resolution
    cached."""
    base = _real(str(folder))
    rel = str(relative)
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not os.path.isabs(rel) and ".." not in parts:
        path = base
        for part in parts:
            path = os.path.join(path, part)
            if os.path.islink(path):
                break
        else:
            return Path(path)
    target = os.path.realpath(os.path.join(base, rel))
    if target != base and not target.startswith(base.rstrip("/") + "/"):
        raise UnsafePath(f"{what} {relative} of {base} leads outside that folder (to {target}): refused")
    return Path(target)


@functools.lru_cache(maxsize=8192)
def _real(folder: str) -> str:
    return os.path.realpath(folder)


def safe_component(value: object, limit: int = MAX_COMPONENT) -> str:
    """A recorded value made safe as one file or folder name: characters outside [A-Za-z0-9._+=-] become `_`, no
    leading dot or dash, no `..`; a changed or long value gets a hash of the original, so two values never share
    a name."""
    text = str(value)
    cleaned = _UNSAFE.sub("_", text).replace("..", "_").lstrip(".-") or "_"
    if cleaned == text and len(text) <= limit:
        return text
    tag = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{cleaned[: limit - 11]}-{tag}"


def href(relative: str) -> str:
    """A relative link for an HTML page: never read as a scheme (`javascript:`) or a protocol-relative URL."""
    return relative if relative.startswith(("./", "../")) else f"./{relative}"
