"""Strict fields of a suite's record: a prompt is a string, an id a string or an integer, a label a string or
nothing. Anything else (null, a number, a list) is a PromptError naming the file, the line and what was expected,
never a prompt "None", "42" or "['a', 'dog']"."""

from __future__ import annotations

from typing import Any

from render.suites._base import PromptError


def _got(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {value!r}"[:80]


def text_field(record: Any, key: str, where: str) -> str:
    """record[key], which must be a string (the prompt's text)."""
    if not isinstance(record, dict):
        raise PromptError(f"{where}: expected a JSON object, got {_got(record)}")
    if key not in record:
        raise PromptError(f"{where}: no {key!r} field (it has {', '.join(map(repr, record)) or 'none'})")
    value = record[key]
    if not isinstance(value, str):
        raise PromptError(f"{where}: {key!r} must be a string (the prompt), got {_got(value)}")
    return value


def id_field(record: dict[str, Any], key: str, where: str) -> str:
    """record[key], a string or an integer (a bool or a float is not an id)."""
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise PromptError(f"{where}: {key!r} must be a string or an integer (the prompt's id), got {_got(value)}")
    return str(value)


def label_field(record: dict[str, Any], key: str, where: str) -> str | None:
    """record[key] when present: a string, or null / absent for none."""
    value = record.get(key)
    if value is not None and not isinstance(value, str):
        raise PromptError(f"{where}: {key!r} must be a string or null, got {_got(value)}")
    return value
