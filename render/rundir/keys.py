"""Names that are safe in paths (the identities of things are render.rundir.identity's)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from render.rundir.errors import UnsafeName

# What may become one path component: no separators, no leading dot, no "..", printable ASCII.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]{0,127}")


def check_name(value: Any, what: str) -> str:
    """A value that becomes a folder or file name; refused (UnsafeName) when it could leave its folder."""
    text = str(value)
    if not SAFE_NAME.fullmatch(text) or ".." in text:
        raise UnsafeName(f"{what}={text!r} cannot be used in a file name: use 1-128 characters of "
                         "[A-Za-z0-9._+=-], starting with a letter or digit, without '..'")
    return text


def image_name(prompt_id: str, seed: int) -> str:
    return f"{check_name(prompt_id, 'prompt id')}__s{int(seed)}.png"


def inside(path: Path, *roots: Path) -> Path:
    """`path`, resolved, when it lies in one of `roots`; otherwise UnsafeName."""
    resolved = path.resolve()
    for root in roots:
        if resolved == root.resolve() or root.resolve() in resolved.parents:
            return resolved
    raise UnsafeName(f"{path} lies outside {', '.join(str(r) for r in roots)}: refusing to write there")
