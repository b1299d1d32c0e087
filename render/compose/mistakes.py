"""Hydra's composition errors that are a user's mistake, answered like the project's own errors.

An option a group does not have (`cache=fbcahce`, `model=tinny`, a defaults entry of a user's file), a key
no schema declares (`step=4`, `cache.treshold=0.1`) and a value of the wrong type (`steps=abc`) reach the user
in one line: the bad value, the closest real
option or key (`did you mean cache=fbcache?`), and the valid ones; not Hydra's listing and config search path.
The choices are the ones Hydra searched (the package's conf/, the user's ./conf, the ConfigStore's launchers);
the keys are those of the node the override lands in. `explain` turns an error into that line (None: not such a
mistake, Hydra's own error stands); `answered()` makes the CLI print it and exit 2, for every composition of the
process (a single run, a sweep's master config and each of its cells, --help, --cfg). HYDRA_FULL_ERROR=1 keeps
Hydra's own error and its traceback.
"""

from __future__ import annotations

import difflib
import os
import re
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from render.errors import ConfigError

SCHEMA_SUFFIX = "_schema"  # the schemas' names before they moved to their own group (render/compose/schema.py)


class CompositionMistake(ConfigError):
    """An override or a defaults entry naming an option or a key that does not exist."""


def _closest(word: str, choices: Sequence[str]) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return close[0] if close else None


def _did_you_mean(suggestion: str | None) -> str:
    return f" (did you mean {suggestion}?)" if suggestion else ""


def _missing_option(error: Any) -> str | None:
    """`group=name` where the group has no option `name`: from the command line, or a defaults entry of a file."""
    first = str(error).splitlines()[0] if str(error) else ""
    where = re.match(r"In '(?P<parent>[^']*)': Could not (?:find|load) '(?P<path>[^']*)'", first)
    if where is None or "/" not in where["path"]:
        return None  # the primary config itself, or a config outside any group: Hydra's own message stands
    group, _, name = where["path"].rpartition("/")
    options = sorted(error.options) if error.options else _group_options(group)
    if not options:
        return None  # not a group at all: a file's defaults entry pointing nowhere
    by = "" if where["parent"] in ("config", "hydra/config") else f" (named in the defaults of {where['parent']})"
    if name.endswith(SCHEMA_SUFFIX) and by:
        return (f"{where['parent']}: its defaults name {name}, the old name of a schema; the schemas are in their own "
                f"group now: write /schema/{group}@_here_ (a cache method's: /schema/cache/<method>@_here_)")
    suggestion = _closest(name, options)
    return (f"{group}={name}{by}: no such {group} option{_did_you_mean(suggestion and f'{group}={suggestion}')}; "
            f"the {group} options are {', '.join(options)}")


def _group_options(group: str) -> list[str]:
    from render.compose.help import group_options

    return group_options(group)


def _unknown_key(error: Any, cause: Any) -> str | None:
    """`a.b=v` where the node `a` has no key `b`: the keys are those the node (its option's schema) declares."""
    parent, key, full_key = getattr(cause, "parent_node", None), str(cause.key), str(cause.full_key)
    if parent is None or not hasattr(parent, "keys"):
        return None
    keys = [str(k) for k in _keys_of(parent, full_key) if str(k) != "hydra"]
    prefix = full_key[: -len(key)] if full_key.endswith(key) else ""
    line = re.search(r"use \+(\S+)", str(error))  # Hydra's own hint holds the override as typed: "use +step=4"
    typed = line[1] if line else full_key
    suggestion = _closest(key, keys)
    if suggestion:
        suggestion = f"{prefix}{suggestion}{typed[len(full_key):]}" if typed.startswith(full_key) else suggestion
    node = f"{prefix.rstrip('.')} has" if prefix else "the config has"
    return f"{typed}: {node} no key {key}{_did_you_mean(suggestion)}; its keys are {', '.join(keys)}"


def _keys_of(parent: Any, full_key: str) -> list[Any]:
    """A group's node: the keys of its option's schema (a cache method's own); any other node: its keys."""
    import dataclasses

    from render import axes

    axis = axes.BY_NAME.get(full_key.split(".")[0]) if full_key.count(".") == 1 else None
    schema = axis.schema_of(parent) if axis is not None and axis.is_group else None
    if schema is not None and dataclasses.is_dataclass(schema):
        return [f.name for f in dataclasses.fields(schema)]
    return list(parent.keys())


def explain(error: BaseException) -> str | None:
    """One line for a composition error that names an option or a key that does not exist; None for any other."""
    from hydra.errors import ConfigCompositionException, MissingConfigException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

    if isinstance(error, MissingConfigException):
        return _missing_option(error)
    cause = error.__cause__
    if isinstance(error, ConfigCompositionException) and isinstance(cause, (ConfigKeyError, ConfigAttributeError)):
        return _unknown_key(error, cause)
    merging = re.match(r"Error merging override (\S+)", str(error))
    if isinstance(error, ConfigCompositionException) and isinstance(cause, ValidationError) and merging:
        return f"{merging[1]}: {str(cause.msg).splitlines()[0]}"  # steps=abc: Value 'abc' of type 'str' could not be converted to Integer
    return None


def full_error_asked() -> bool:
    return os.environ.get("HYDRA_FULL_ERROR") == "1"


@contextmanager
def answered() -> Iterator[None]:
    """Within this block every Hydra composition that fails on such a mistake ends the command with its line and
    exit status 2 (render.run.preflight.exit_with), unless HYDRA_FULL_ERROR=1 asks for Hydra's own error."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    from render.run.preflight import exit_with

    original = ConfigLoaderImpl.load_configuration

    def load_configuration(self: ConfigLoaderImpl, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, **kwargs)
        except Exception as error:
            message = None if full_error_asked() else explain(error)
            if message is None:
                raise
            exit_with(CompositionMistake(message))

    ConfigLoaderImpl.load_configuration = load_configuration  # type: ignore[method-assign]
    try:
        yield
    finally:
        ConfigLoaderImpl.load_configuration = original  # type: ignore[method-assign]
