"""Patching classes and modules so that every original comes back: the machinery under the watcher's hooks.

A patch keeps a reference to the original and puts it back at `uninstall()`, in reverse order. The per-call
patches (those that run on every call of a step's work) can be taken out and put back while installed: a step
watched only at its edges pays nothing for them.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

RESUME_BUDGET = 200
"""Resumes of the per-call hooks one process may make. Each pause and resume sets or deletes an attribute of
torch.nn.Module, torch.optim.Optimizer and each optimizer class seen stepping, which modifies those classes and all
their subclasses; from Python 3.13, CPython stops caching a class's attribute lookups for good once it has been modified
1 000 times (MAX_VERSIONS_PER_CLASS), and every later module call of the process would be slower (BENCHMARKS.md, "Where
the code's constants come from"). 200 resumes are 400 modifications, leaving most of that budget to the user's code."""

_resumes = [0]
"""Resumes made in this process so far, by every Hooks."""


def resumes_left() -> int:
    """How many more times this process may resume the per-call hooks (RESUME_BUDGET)."""
    return max(0, RESUME_BUDGET - _resumes[0])


class Patches:
    """Patches put in, and how to take each out."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []
        self._per_call: list[tuple[Callable[[], None], Callable[[], None]]] = []
        """(put in, take out) of the hooks that run on every call of a step's work; `pause()` takes
        them out, `resume()` puts them back."""
        self.paused = False
        self.live = False
        """Between install() and uninstall(): a wrapper someone kept a reference to (an LR scheduler
        wraps `optimizer.step` as it finds it) calls straight through outside that."""

    def _patch(self, owner: Any, name: str, make: Callable[[Any], Any], per_call: bool = False) -> None:
        had_own = name in owner.__dict__
        original = owner.__dict__.get(name) if had_own else getattr(owner, name)
        wrapper = make(original)
        if not (per_call and self.paused):  # a per-call hook patched while paused goes in at resume()
            setattr(owner, name, wrapper)

        def undo() -> None:
            if had_own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)

        if per_call:
            self._per_call.append((lambda: setattr(owner, name, wrapper), undo))
        self._undo.append(undo)

    def pause(self) -> None:
        """Take out the per-call hooks (until `resume()`); step edges, reads, data, h2d and saves stay."""
        if self.paused:
            return
        for _, take_out in self._per_call:
            take_out()
        self.paused = True

    def resume(self) -> None:
        if not self.paused:
            return
        _resumes[0] += 1
        for put_in, _ in self._per_call:
            put_in()
        self.paused = False

    @staticmethod
    def _timed(original: Callable[..., Any], report: Callable[[float], None],
               only_if: Callable[[], bool] | None = None) -> Callable[..., Any]:
        """`original`, the seconds each call takes reported to `report` (only while `only_if()` holds, if given)."""

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if only_if is not None and not only_if():
                return original(*args, **kwargs)
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                report(time.perf_counter() - t0)

        return wrapper

    def uninstall(self) -> None:
        self.live = False
        self.resume()  # the undo list restores from the installed state
        while self._undo:
            self._undo.pop()()
        self._per_call.clear()
