"""Secrets are never recorded or printed: credentials in URLs, and token-like query parameters, are redacted.

One leaf module, used wherever a string may carry a URL on its way to a record or a screen: run.json (the
config, the overrides), the renderer's log, the index's `runs` rows, the HTML reports (every value the
templates print), the exports and the CLI's messages. Environment variables are recorded only by name in
RECORDED_ENV (render.run.provenance).
"""

from __future__ import annotations

import logging
import re
from typing import Any

HIDDEN = "***"
# scheme://user:password@host, scheme://token@host
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s@?#'\"]+)@")
# ?token=..., &api_key=..., password=... in a query string or an override
_SECRET_PARAM = re.compile(
    r"(?P<key>(?:^|[?&;,\s])(?:[A-Za-z0-9_.+~-]*?(?:token|password|passwd|secret|api[_-]?key|access[_-]?key|"
    r"signature|credentials?|auth))=)(?P<value>[^&;,\s'\"]+)", re.IGNORECASE)

# The only environment variables a record may carry (their values); any other is neither read nor written.
RECORDED_ENV = ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID")


def redact(text: str) -> str:
    """`text` with the credentials of every URL in it (user:password@, token@) and secret-named parameters
    (token=, password=, api_key=, ...) replaced by ***."""
    if "@" not in text and "=" not in text:
        return text
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{HIDDEN}@", text)
    return _SECRET_PARAM.sub(lambda m: f"{m['key']}{HIDDEN}", text)


# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional overrides and isolates that reorder a line
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str) -> str:
    """`text` with every terminal control character written as its escape (ESC as `\\x1b`, U+202E as `\\u202e`),
    newlines and tabs kept: a name a run folder or an override carries (data, never an instruction to the terminal)
    cannot retitle the window, move the cursor, erase a line or reorder what is shown."""
    return _CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def shown(text: str) -> str:
    """`text` as it may reach a screen or a log: its credentials redacted, its control characters escaped."""
    return escape_controls(redact(text))


SUMMARY_CHARS = 500  # the most of one recorded text (a prompt, a failure's message, a path and why) a summary line quotes


def shortened(text: str, limit: int = SUMMARY_CHARS) -> str:
    """`text` as a summary quotes it: whole when within `limit` characters, else its start and how much was cut (the
    record it comes from keeps it whole)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit].rstrip()}… ({len(text) - limit:,} more characters)"


def redact_data(value: Any) -> Any:
    """A JSON-like value (dicts, lists, strings) with every string redacted (keys too)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_data(v) for v in value)
    return value


def finalize(value: Any) -> Any:
    """Jinja2's `finalize`: every value a template prints, redacted (strings; other values as they are)."""
    return redact(value) if isinstance(value, str) else value


class RedactingFilter(logging.Filter):
    """A log filter that redacts the formatted message of every record it passes, and escapes its control
    characters (render.rundir.redact.shown)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = shown(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def redact_files(*paths: Any) -> None:
    """Rewrite these text files (Hydra's own records: .hydra/*.yaml, multirun.yaml) with their credentials
    redacted; a file that holds none, or is missing, is left as it is."""
    import os
    from pathlib import Path

    for path in map(Path, paths):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        cleaned = "\n".join(redact(line) for line in text.split("\n"))
        if cleaned != text:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(cleaned, encoding="utf-8")
            os.replace(tmp, path)


_INSTALLED: list[bool] = []


def install() -> None:
    """Redact every log record of this process when it is made, whichever logger (Hydra's launch lines with the
    overrides, the renderer's, a library's) and whichever handler (terminal, render.log). Once per process."""
    if _INSTALLED:
        return
    _INSTALLED.append(True)
    make = logging.getLogRecordFactory()
    scrub = RedactingFilter()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        scrub.filter(record)
        return record

    logging.setLogRecordFactory(factory)
