"""Run a function on a module as it loads: a finder on `sys.meta_path` finds the module with the other finders, and
its loader runs the module, then the function. For wrapping a class of a package the script imports later (the
doctor's note of the line that made a Trainer, `doctor --try`'s settings on it)."""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Collection
from types import ModuleType
from typing import Any


class _ThenWrap(importlib.abc.Loader):
    """A module's own loader, and the wrapping after it ran; every other attribute is the loader's."""

    def __init__(self, loader: Any, then: Callable[[ModuleType], None]) -> None:
        self._loader, self._then = loader, then

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._then(module)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # our own fields, asked before they are set (a copy being made), and dunders
            raise AttributeError(name)
        return getattr(self._loader, name)


class AfterImport(importlib.abc.MetaPathFinder):
    """Calls `then(module)` after each of the modules `names` loads; `install()` also calls it at once on those
    loaded already. Several may wait for one module (the doctor's note of a Trainer's line, and `doctor --try`'s
    setting on it): each is called, in the order they stand on `sys.meta_path`."""

    def __init__(self, names: Collection[str], then: Callable[[ModuleType], None]) -> None:
        self.names, self.then = names, then

    def install(self) -> None:
        for name in self.names:
            module = sys.modules.get(name)
            if module is not None:
                self.then(module)
        sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.names:
            return None
        # every AfterImport that waits for this module: the first one asked wraps the loader for all of them
        waiting = [f.then for f in sys.meta_path if isinstance(f, AfterImport) and fullname in f.names]
        for finder in sys.meta_path:
            if isinstance(finder, AfterImport) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _ThenWrap(spec.loader, _each(waiting))
                return spec
        return None


def _each(thens: list[Callable[[ModuleType], None]]) -> Callable[[ModuleType], None]:
    def then(module: ModuleType) -> None:
        for one in thens:
            one(module)
    return then
