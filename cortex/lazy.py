"""Names a package offers that load from their modules on first use (PEP 562): importing the package loads none
of them, so that what a command does not use costs it nothing."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from importlib import import_module

__all__ = ["lazy_names"]


def lazy_names(module: str, homes: Mapping[str, Iterable[str]]) -> tuple[list[str], Callable, Callable]:
    """For the module named `module` (being imported), whose names `homes` lists by the module that defines them
    (relative to its package: ".items"): those names sorted, and the module's `__getattr__` (loads a name, then
    keeps it) and `__dir__`."""
    home_of = {name: home for home, names in homes.items() for name in names}
    package = sys.modules[module].__package__

    def __getattr__(name: str):
        home = home_of.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(import_module(home, package), name)
        setattr(sys.modules[module], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[module]), *home_of})

    return sorted(home_of), __getattr__, __dir__
