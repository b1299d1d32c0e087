"""Compose each distinct config once per invocation: Hydra's pure composition steps, memoised.

Hydra composes every cell from scratch: each YAML file parsed again, the whole ConfigStore deep-copied, the
defaults tree rebuilt and every file merged (~85 ms a cell here, 86 % of a 300-cell sweep's preflight; and a
single run composes twice, once for `get_mode`). Within one `python -m render` the config files are read once,
as any program reads its configuration at start, so inside `composed_once()`:

- a config file's load is memoised by (config sources, path) from its second load on (the primary config is
  loaded again for every cell);
- a defaults list by (sources, primary config, the overrides that choose configs): a value override (`steps=8`,
  `+foo=1`, `~bar`) never changes which configs compose, so the cells of `steps=1..300` share one; and when no
  group is left `???`, skipping missing groups (a sweep's master config) or not (its cells) is the same list;
- the merge of a defaults list by (sources, the list itself);
- the ConfigStore is shared instead of deep-copied into each composition's repository (it is a process
  singleton that composition only reads).

Each hit hands out a copy of its own (unpickled from the kept bytes: a quarter of a deepcopy's time), and all that depends on a cell's own overrides (applying its value overrides,
`hydra.overrides`, `hydra.runtime.choices`, `override_dirname`) still runs in Hydra's own code, so every
config is the one Hydra composes without the memo: `tests/test_composition.py` holds the two equal over
generated override sets. Outside the tested Hydra line (1.3) nothing is patched. (Not a module of
hydra_plugins/: Hydra's plugin scan executes those again, which would reset the memo in the middle of a run.)
"""

from __future__ import annotations

import copy
import pickle
from contextlib import contextmanager
from typing import Any, Callable, Collection, Iterator

import hydra
from hydra._internal import config_loader_impl, defaults_list
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.config_repository import ConfigRepository, IConfigRepository
from hydra.core.config_store import ConfigStore

SUPPORTED = hydra.__version__.startswith("1.3.")

_loads: dict[tuple[Any, ...], Any] = {}  # None: loaded once, not kept
_defaults: dict[tuple[Any, ...], Any] = {}
_merged: dict[tuple[Any, ...], Any] = {}
_active = False


class _Kept:
    """A pristine value handed out as copies: kept as pickled bytes (an OmegaConf config unpickles in a quarter
    of a deepcopy's time, types and flags included), or as a deep copy where it does not pickle."""

    def __init__(self, value: Any) -> None:
        try:
            self.blob: bytes | None = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - a value holding something pickle refuses (a local class): deepcopy it
            self.blob, self.value = None, copy.deepcopy(value)

    def copy(self) -> Any:
        return pickle.loads(self.blob) if self.blob is not None else copy.deepcopy(self.value)


def _sources(repo: IConfigRepository) -> tuple[tuple[str | None, str | None], ...]:
    return tuple((source.provider, source.path) for source in repo.get_sources())


def _memoised_load(original: Callable[..., Any]) -> Callable[..., Any]:
    def load_config(self: ConfigRepository, config_path: str) -> Any:
        key = (_sources(self), config_path)
        if key not in _loads:  # its first load: most files are loaded once, and copying them would cost more
            _loads[key] = None
            return original(self, config_path)
        if _loads[key] is None:
            _loads[key] = _Kept(original(self, config_path))  # kept pristine: every later caller gets its own copy
        return _loads[key].copy()
    return load_config


def _memoised_defaults(original: Callable[..., Any]) -> Callable[..., Any]:
    def create_defaults_list(repo: IConfigRepository, config_name: str | None, overrides_list: list[Any],
                             prepend_hydra: bool, skip_missing: bool) -> Any:
        cell = defaults_list.Overrides(repo=repo, overrides_list=overrides_list)  # Hydra's own split (and errors)
        values = {id(override) for override in cell.config_overrides}
        choosing = [o for o in overrides_list if not o.is_sweep_override() and id(o) not in values]
        key = (_sources(repo), config_name, tuple(o.input_line for o in choosing), prepend_hydra)
        if (*key, skip_missing) not in _defaults:
            result = original(repo, config_name, choosing, prepend_hydra, skip_missing)
            for flag in ((False, True) if _nothing_missing(result.defaults_tree) else (skip_missing,)):
                _defaults[(*key, flag)] = result
        shared = _defaults[(*key, skip_missing)]
        return defaults_list.DefaultsList(defaults=list(shared.defaults), config_overrides=cell.config_overrides,
                                          defaults_tree=shared.defaults_tree, overrides=shared.overrides)
    return create_defaults_list


def _nothing_missing(tree: Any) -> bool:
    """No group of the defaults tree is left `???` (what `skip_missing` would skip, or fail on)."""
    stack = [tree]
    while stack:
        item = stack.pop()
        node = getattr(item, "node", item)  # a tree node, or a leaf default
        if node.get_config_path().endswith("???"):  # the virtual root's path is "<root>"
            return False
        stack.extend(getattr(item, "children", None) or [])
    return True


def _memoised_merge(original: Callable[..., Any]) -> Callable[..., Any]:
    def compose(self: ConfigLoaderImpl, defaults: list[Any], repo: IConfigRepository) -> Any:
        key = (_sources(repo), tuple((d.config_path, d.package, d.parent, d.is_self, d.primary, d.override_key)
                                     for d in defaults))
        if key not in _merged:
            merged = original(self, defaults, repo)
            _merged[key] = _Kept(merged)
            return merged
        return _merged[key].copy()
    return compose


def _shared_store(self: ConfigStore, memo: dict[int, Any]) -> ConfigStore:
    return self


PATCHES = ("load", "defaults", "merge", "store")  # each can be tested alone against Hydra (tests/test_composition.py)


@contextmanager
def composed_once(patches: Collection[str] = PATCHES) -> Iterator[None]:
    """Within this block each distinct config is composed once (see the module's text); nested blocks share
    the outer one, and the memo is dropped when the outermost ends. `patches`: which of Hydra's internals are
    memoised (all of them, except in the tests that hold each alone to Hydra's own result)."""
    global _active
    if _active or not SUPPORTED:
        yield
        return
    unknown = set(patches) - set(PATCHES)
    if unknown:
        raise ValueError(f"composed_once: unknown patch(es) {sorted(unknown)}; valid: {', '.join(PATCHES)}")
    saved = (ConfigRepository.load_config, config_loader_impl.create_defaults_list,
             ConfigLoaderImpl._compose_config_from_defaults_list, ConfigStore.__dict__.get("__deepcopy__"))
    if "load" in patches:
        ConfigRepository.load_config = _memoised_load(saved[0])  # type: ignore[method-assign]
    if "defaults" in patches:
        config_loader_impl.create_defaults_list = _memoised_defaults(saved[1])
    if "merge" in patches:
        ConfigLoaderImpl._compose_config_from_defaults_list = _memoised_merge(saved[2])  # type: ignore[method-assign]
    if "store" in patches:
        ConfigStore.__deepcopy__ = _shared_store  # type: ignore[attr-defined]
    _active = True
    try:
        yield
    finally:
        _active = False
        ConfigRepository.load_config = saved[0]  # type: ignore[method-assign]
        config_loader_impl.create_defaults_list = saved[1]
        ConfigLoaderImpl._compose_config_from_defaults_list = saved[2]  # type: ignore[method-assign]
        if saved[3] is None:
            if "__deepcopy__" in ConfigStore.__dict__:
                del ConfigStore.__deepcopy__  # type: ignore[attr-defined]
        else:
            ConfigStore.__deepcopy__ = saved[3]  # type: ignore[attr-defined]
        _loads.clear()
        _defaults.clear()
        _merged.clear()
