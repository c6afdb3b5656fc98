"""A name -> object registry, in the style of DomainBed's ``algorithms.py``.

Activations, objectives, datasets and feature learners are looked up by name through a
:class:`Registry`, so that notebooks and sweeps select them with a string parameter and an unknown
name fails with the list of valid ones. A registry is where users plug things in, and the one
list of its names: commands, protocols, labels and table orders read it, never a copy of it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from .validation import check_choice

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to objects; ``what`` names the parameter in error messages."""

    def __init__(self, what: str):
        self.what = what
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._items:
                raise KeyError(f"{self.what} {name!r} is registered twice")
            self._items[name] = obj
            return obj

        return decorator

    def unregister(self, name: str) -> T:
        """Take ``name`` out again (a test's or a loaded file's addition) and return what it held."""
        check_choice(self.what, name, self._items)
        return self._items.pop(name)

    def get(self, name: str) -> T:
        check_choice(self.what, name, self._items)
        return self._items[name]

    def names(self) -> list[str]:
        return list(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
