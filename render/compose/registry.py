"""One registry for every kind of plug-in (prompt readers, model families, cache methods, ...).

A `Registry[T]` maps names to items. An item gets in by `add` (or the `register` decorator) or, when the
registry is tied to a package, by living in it: the first lookup imports every public module of the
package (pkgutil, sorted by name; `_private` modules are skipped) and adds each module's `attribute`
(e.g. `READER`), so adding a plug-in is adding one module, as lm-eval's tasks and optuna's samplers are.
Discovery is lazy so that importing the registry imports none of the plug-ins (nor what they import).
A name taken twice is refused; an unknown name is an error naming the valid ones, sorted.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from render.errors import RenderError

T = TypeVar("T")


class RegistryError(RenderError, LookupError):
    """A name registered twice, or a lookup of a name nothing registered."""


class Registry(Mapping[str, T]):
    """Named items of one kind. `kind` words the errors ("model family"), `key` is the config key whose value
    names an item ("model.family"), `name_of` reads an item's own name; `package` and `attribute` tie it to a
    package whose modules export the item under `attribute`; `error` is the exception class its errors raise."""

    def __init__(self, kind: str, key: str, name_of: Callable[[T], str], *, package: str | None = None,
                 attribute: str | None = None, error: type[Exception] = RegistryError) -> None:
        if (package is None) != (attribute is None):
            raise ValueError("a registry tied to a package needs both the package and the attribute its modules export")
        self.kind, self.key, self._name_of, self._error = kind, key, name_of, error
        self._package, self._attribute = package, attribute
        self._items: dict[str, T] = {}
        self._where: dict[str, str] = {}  # name -> the module that registered it, for the duplicate error
        self._discovered = package is None

    def add(self, item: T, *, where: str = "") -> T:
        """Register `item` under its own name; a name already taken is refused, naming both places."""
        name = self._name_of(item)
        if name in self._items:
            first = self._where.get(name) or "an earlier add"
            raise self._error(f"{self.kind} {name!r} is registered twice ({first} and {where or 'a later add'})")
        self._items[name] = item
        self._where[name] = where
        return item

    def register(self, item: T) -> T:
        """`add` as a decorator (for items that are functions or classes)."""
        return self.add(item, where=getattr(item, "__module__", ""))

    def _discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True  # set first: a plug-in module may look the registry up while it is imported
        assert self._package is not None and self._attribute is not None
        package = importlib.import_module(self._package)
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{self._package}.{info.name}")
            item = getattr(module, self._attribute, None)
            if item is not None and self._items.get(self._name_of(item)) is not item:
                self.add(item, where=module.__name__)

    def __getitem__(self, name: str) -> T:
        """The item called `name`; the registry's error naming the valid names, sorted, when there is none."""
        self._discover()
        if name not in self._items:
            raise self._error(f"{self.key}={name}: no such {self.kind}; valid: {', '.join(sorted(self._items))}")
        return self._items[name]

    def get(self, name: str, default: T | None = None) -> T | None:  # type: ignore[override]
        """The item called `name`, else `default` (Mapping.get would let the registry's error through)."""
        self._discover()
        return self._items.get(name, default)

    def __contains__(self, name: object) -> bool:
        self._discover()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        self._discover()
        return iter(self._items)

    def __len__(self) -> int:
        self._discover()
        return len(self._items)

    def origin(self, name: str) -> str:
        """The module that registered `name` ("" when an `add` did not say)."""
        self[name]
        return self._where[name]

    def names(self) -> list[str]:
        """The registered names, sorted (what an error or a help line lists)."""
        return sorted(self)


__all__ = ["Registry", "RegistryError"]
