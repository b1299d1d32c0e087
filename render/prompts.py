"""Prompt manifests: JSONL files of {"id": ..., "text": ...} with stable ids."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from render.errors import RenderError
from render.rundir import UnsafeName, check_name

PACKAGE_PROMPTS = Path(__file__).parent / "prompts"


class PromptError(RenderError, ValueError):
    """A prompt manifest is missing or malformed."""


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str


def resolve_manifest(file: str) -> Path:
    """An absolute path, a path relative to the working directory, or a manifest shipped with hypergrid."""
    path = Path(file).expanduser()
    if path.is_absolute() or path.exists():
        candidates = [path]
    else:
        candidates = [path, PACKAGE_PROMPTS / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    shipped = ", ".join(sorted(p.name for p in PACKAGE_PROMPTS.glob("*.jsonl")))
    raise PromptError(
        f"prompts.file={file!r}: no such file (looked in {', '.join(str(c) for c in candidates)}). "
        f"Give a JSONL file of {{\"id\", \"text\"}} lines, or one of the shipped manifests: {shipped}"
    )


def load_prompts(file: str, limit: int | None = None) -> list[Prompt]:
    """Read a manifest; ids must be unique and texts non-empty. `limit` keeps the first N prompts."""
    path = resolve_manifest(file)
    prompts: list[Prompt] = []
    seen: set[str] = set()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            prompt = Prompt(id=str(record["id"]), text=str(record["text"]))
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise PromptError(f"{path}:{number}: expected a JSON object with \"id\" and \"text\" ({error})") from error
        try:
            check_name(prompt.id, "prompt id")  # ids name image files
        except UnsafeName as error:
            raise PromptError(f"{path}:{number}: {error}") from None
        if prompt.id in seen:
            raise PromptError(f"{path}:{number}: duplicate prompt id {prompt.id!r}")
        if not prompt.text.strip():
            raise PromptError(f"{path}:{number}: prompt {prompt.id!r} has an empty text")
        seen.add(prompt.id)
        prompts.append(prompt)
    if not prompts:
        raise PromptError(f"{path}: the manifest holds no prompts")
    if limit is not None:
        if limit < 1:
            raise PromptError(f"prompts.limit={limit}: must be at least 1 (or null for all {len(prompts)} prompts)")
        prompts = prompts[:limit]
    return prompts
