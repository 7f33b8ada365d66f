"""Result objects render themselves, as torchinfo's `ModelStatistics` does: `print(result)` and rich's console show
its terminal view, a notebook its HTML view, each the one view `trainspeed.report.views` has for its type.

The views live in `report/`, above the packages whose results they show; this mixin finds them by the module's name
when a result is first shown, so that a result's package does not import `report/`.
"""

from __future__ import annotations

import importlib
import io
from typing import Any

VIEWS = "trainspeed.report.views"
"""The module whose `view_of(result)` gives each result type's views."""

TEXT_WIDTH = 100
"""Columns of `str(result)`: a terminal's view without colour."""


def _views(result: Any) -> Any:
    return importlib.import_module(VIEWS).view_of(result)


class Renders:
    """Mixin of the result types: rich's `__rich__`, `str()` and IPython's `_repr_html_` render the type's view."""

    def __rich__(self) -> Any:
        return _views(self).text(self)

    def __str__(self) -> str:
        from rich.console import Console

        console = Console(width=TEXT_WIDTH, record=True, color_system=None, force_terminal=False, force_jupyter=False,
                          file=io.StringIO())
        console.print(self.__rich__())
        return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"

    def _repr_html_(self) -> str:
        return str(_views(self).html(self))
