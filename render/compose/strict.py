"""Overrides that compose but would be ignored: keys no schema knows (Hydra's `+key=...` adds them), and
cache parameters given to cells whose cache takes none. Both are refused at preflight, by name."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
from typing import Any, Sequence

from omegaconf import DictConfig

from render import axes
from render.cell import ConfigError


def _dataclass_of(annotation: Any) -> type | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
            return candidate
    return None


@functools.lru_cache(maxsize=None)
def _hints(schema: type) -> dict[str, Any]:
    return typing.get_type_hints(schema)  # evaluates every annotation: once per schema, not once per cell


def unknown_keys(node: DictConfig, schema: type, prefix: str = "") -> list[str]:
    """Dotted keys of `node` that `schema` (a dataclass, nested ones followed) does not declare."""
    hints = _hints(schema)
    unknown = []
    for key in node.keys():
        key = str(key)
        if key not in hints:
            close = difflib.get_close_matches(key, list(hints), n=1)
            unknown.append(f"{prefix}{key}" + (f" (did you mean {prefix}{close[0]}?)" if close else ""))
            continue
        child, nested = node.get(key), _dataclass_of(hints[key])
        if nested is not None and isinstance(child, DictConfig):
            unknown += unknown_keys(child, nested, f"{prefix}{key}.")
    return unknown


def check_known_keys(cfg: DictConfig) -> None:
    """Refuse a config holding keys that no schema declares: they would be silently ignored."""
    from render.compose.schema import RenderConf

    unknown = unknown_keys(cfg, RenderConf)
    for axis in axes.GROUPS:  # a group's node follows its option's schema, which the top-level schema cannot name
        node, schema = cfg.get(axis.name), None
        if isinstance(node, DictConfig):
            schema = axis.schema_of(node)
        if schema is not None:
            unknown += unknown_keys(node, schema, f"{axis.name}.")
    unknown = [u for u in unknown if not u.startswith("hydra")]
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(unknown)}: no config schema declares them, so they would be "
                          "ignored; `python -m render --help` lists the groups and options")


def unused_cache_overrides(overrides: Sequence[str], cache: dict[str, Any]) -> set[str]:
    """The command line's `cache.<param>=...` overrides that this cell's cache (its key value) does not take."""
    used = cache
    unused = set()
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if key.startswith("cache.") and key != "cache.name" and key.split(".", 1)[1] not in used:
            unused.add(override)
    return unused


def refuse_unused_cache_overrides(unused: set[str], cells: int) -> None:
    if unused:
        where = "this run's cache" if cells == 1 else f"the cache of any of the sweep's {cells} cells"
        raise ConfigError(f"{', '.join(sorted(unused))}: not a parameter of {where}, so it would be ignored; "
                          "choose a cache that takes it (e.g. cache=fbcache cache.threshold=0.1) or drop the override")
