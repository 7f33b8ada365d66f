"""The user's warnings at the user's lines while the watcher's wrappers sit between the user's code and torch.

torch warns from C++ at the Python frame that called it (`float(loss)` on a tensor that requires grad: "Converting a
tensor with requires_grad=True to a scalar ..."), and Python code warns `stacklevel` frames up; with a wrapper of the
watcher's in between (the counted host reads, `torch.save`), that frame is the wrapper's, and the warning would name
`trainspeed/watch/syncs.py` instead of the user's line. While watching, a warning raised at a line of the watcher's
own source is issued again at the first frame outside trainspeed from there outwards, with that frame's module and
registry: the user's filters (`-W`, `warnings.filterwarnings(..., module=...)`) and "once per line" apply as they do
unwatched. The watcher's lines get the "always" action so that every warning raised there reaches this re-issue (the
user's registry decides what is shown)."""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType
from typing import Any, TextIO

_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_WATCHER = os.path.dirname(os.path.abspath(__file__)) + os.sep
_MODULE = r"trainspeed\.watch\."
"""The filters' module pattern of the watcher's source (a warning's module is its frame's `__name__`)."""


def _user_frame(filename: str, lineno: int) -> FrameType | None:
    """The frame that called the watcher's code the warning names: outwards from the frame at filename:lineno, the
    first outside trainspeed."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and not (frame.f_code.co_filename == filename and frame.f_lineno == lineno):
        frame = frame.f_back
    while frame is not None and frame.f_code.co_filename.startswith(_OURS):
        frame = frame.f_back
    return frame


class UserLineWarnings:
    """Installed while the watcher's wrappers are: warnings raised at their lines re-issued at the user's."""

    def __init__(self) -> None:
        self._shown: Any = None
        self._filter: tuple[Any, ...] | None = None

    def install(self) -> None:
        if self._shown is not None:
            return
        warnings.filterwarnings("always", module=_MODULE)
        self._filter = warnings.filters[0]
        self._shown = warnings.showwarning
        warnings.showwarning = self._show

    def uninstall(self) -> None:
        if self._shown is None:
            return
        if warnings.showwarning == self._show:
            warnings.showwarning = self._shown
        filters: list[Any] = warnings.filters  # type: ignore[assignment]  # a list, typed as a sequence
        if self._filter in filters:
            filters.remove(self._filter)
            warnings._filters_mutated()  # type: ignore[attr-defined]
        self._shown, self._filter = None, None

    def _show(self, message: Warning | str, category: type[Warning], filename: str, lineno: int,
              file: TextIO | None = None, line: str | None = None) -> None:
        frame = _user_frame(filename, lineno) if filename.startswith(_WATCHER) else None
        if frame is None:
            self._shown(message, category, filename, lineno, file, line)
            return
        module_globals = frame.f_globals
        registry = module_globals.setdefault("__warningregistry__", {})
        warnings.warn_explicit(message, category, frame.f_code.co_filename, frame.f_lineno,
                               module=module_globals.get("__name__"), registry=registry,
                               module_globals=module_globals)
