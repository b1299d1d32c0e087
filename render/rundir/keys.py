"""Identities: the cell key, a prompt's content hash, the split rule, and names that are safe in paths."""

from __future__ import annotations

import hashlib
import json
import re
import string
from pathlib import Path
from typing import Any, Iterable

from render.rundir.errors import UnsafeName

# What may become one path component: no separators, no leading dot, no "..", printable ASCII.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]{0,127}")
_PUNCTUATION = str.maketrans({c: " " for c in string.punctuation})


def cell_key_of(canonical: dict[str, Any]) -> str:
    """First 16 hex digits of the sha256 of the canonical JSON of a cell (run.json["cell"])."""
    blob = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def normalise_text(text: str) -> str:
    """A prompt's text as compared across manifests: case, punctuation and spacing ignored."""
    return " ".join(text.casefold().translate(_PUNCTUATION).split())


def text_hash(text: str) -> str:
    """Part of a sample's identity: two prompts with the same id but different texts are different samples."""
    return hashlib.sha256(normalise_text(text).encode()).hexdigest()[:16]


def shared_texts(a: Iterable[tuple[str, str]], b: Iterable[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """The split rule: (id in a, id in b, text) for every normalised text two manifests share."""
    in_b = {normalise_text(text): pid for pid, text in b}
    return [(pid, in_b[normalise_text(text)], text) for pid, text in a if normalise_text(text) in in_b]


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
