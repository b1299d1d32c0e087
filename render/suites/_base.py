"""The one shape every prompt-suite reader has: a format name, the file suffixes it claims, and
`read(path) -> list[Entry]`. What is common to all of them (ids derived from content where the file
has none, duplicates, safe ids, empty texts) is done once, by `to_prompts`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from render.errors import RenderError
from render.rundir import UnsafeName, check_name, text_hash, text_identity

log = logging.getLogger("render")


class PromptError(RenderError, ValueError):
    """A prompt manifest or suite file is missing or malformed."""


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str
    category: str | None = None  # the suite's category (DrawBench "Category", GenEval "tag", ...)
    challenge: str | None = None  # PartiPrompts' "Challenge" (what makes the prompt hard)


@dataclass(frozen=True)
class Entry:
    """One prompt as a reader found it; `where` ("file:line") is for error messages."""

    text: str
    where: str
    id: str | None = None  # None: derived from the text (`content_id`)
    category: str | None = None
    challenge: str | None = None


@dataclass(frozen=True)
class Reader:
    format: str  # the prompts.format value
    suffixes: tuple[str, ...]  # what prompts.format=auto picks it for
    description: str  # one line for errors and docs
    read: Callable[[Path], list[Entry]]
    # for a suffix several readers claim: whether this file is this reader's (a reader that has `claims` is asked
    # before one that has none, which takes the files no other claims)
    claims: Callable[[Path], bool] | None = None


def content_id(prefix: str, text: str) -> str:
    """A stable id for a prompt that has none in its file: the format and the text's content hash."""
    return f"{prefix}-{text_hash(text)[:10]}"


def _longer_id(prefix: str, identity: str, taken: set[str]) -> str:
    """A content id that no other prompt of the file has: more of the text identity's sha256, until it is unique
    (distinct identities differ somewhere in their 64 hex digits)."""
    import hashlib

    digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()
    for length in (16, 24, 32, 64):
        candidate = f"{prefix}-{digest[:length]}"
        if candidate not in taken:
            return candidate
    return candidate


def _label(value: object) -> str | None:
    text = " ".join(str(value).split()) if value is not None else ""
    return text or None


def to_prompts(entries: list[Entry], path: Path, prefix: str) -> list[Prompt]:
    """Prompts with safe, unique ids. A text found again (the same text identity) is the same prompt: the first is kept."""
    prompts: list[Prompt] = []
    ids: set[str] = set()
    texts: dict[str, str] = {}
    for entry in entries:
        text = entry.text.strip()
        if not text:
            raise PromptError(f"{entry.where}: empty prompt text")
        prompt_id = entry.id if entry.id is not None else content_id(prefix, text)
        try:
            check_name(prompt_id, "prompt id")  # ids name image files
        except UnsafeName as error:
            raise PromptError(f"{entry.where}: {error}") from None
        norm = text_identity(text)
        if norm in texts:
            log.warning("%s: the same text as %s (%s): kept once", entry.where, texts[norm], shown(text))
            continue
        if prompt_id in ids and entry.id is None:  # two texts whose short content ids agree: a longer one
            prompt_id = _longer_id(prefix, norm, ids)
        if prompt_id in ids:
            raise PromptError(f"{entry.where}: duplicate prompt id {prompt_id!r}")
        ids.add(prompt_id)
        texts[norm] = entry.where
        prompts.append(Prompt(prompt_id, text, _label(entry.category), _label(entry.challenge)))
    if not prompts:
        raise PromptError(f"{path}: the file holds no prompts")
    return prompts


SHOWN = 80  # characters of a prompt that a message or summary shows


def shown(text: str, limit: int = SHOWN) -> str:
    """A prompt as a message shows it: repr'd, and cut with its length said when it is longer than `limit`."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text)} characters)"
