"""A package's names loaded on first use (PEP 562): importing one of its modules does not import the others."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, where: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose name `n` lives in module `where[n]`."""
    module = importlib.import_module(package)

    def __getattr__(name: str) -> Any:
        home = where.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    def __dir__() -> list[str]:
        return sorted({*vars(module), *where})

    return __getattr__, __dir__
