"""Split host time into phases: exclusive time, so a sync inside forward is not counted twice."""

from __future__ import annotations

import time
from collections.abc import Callable

PHASES = ("data", "h2d", "forward", "backward", "optimizer", "sync", "checkpoint", "comm", "other")
"""`comm`: DDP's gradient all-reduce where backward could not hide it (see watch/comm.py); the
phase clock itself never opens it: the watcher moves that time out of backward (or other) per step."""


_ZERO = dict.fromkeys(PHASES, 0.0)


class PhaseClock:
    """A stack of open phases; time goes to the innermost one. `other` is what no phase claims.

    `now` is injectable so the arithmetic is tested with a fake clock.
    """

    def __init__(self, now: Callable[[], float] = time.perf_counter) -> None:
        self.now = now
        self.stack: list[str] = []
        self.totals: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self._since = now()
        self.step_started = self._since

    def enter(self, phase: str) -> None:
        t = self.now()
        stack = self.stack
        self.totals[stack[-1] if stack else "other"] += t - self._since
        self._since = t
        stack.append(phase)

    def exit(self, phase: str) -> None:
        t = self.now()
        stack = self.stack
        self.totals[stack[-1] if stack else "other"] += t - self._since
        self._since = t
        if stack and stack[-1] == phase:
            stack.pop()
            return
        # an exception unwound past an inner phase: pop down to `phase`
        while stack:
            if stack.pop() == phase:
                break

    def span(self, phase: str, t0: float, t1: float) -> None:
        """`phase` ran from t0 to t1 (both after the last edge): the time before t0 goes to the
        open phase, t0..t1 to `phase`. One call where enter + exit would take two."""
        totals = self.totals
        stack = self.stack
        totals[stack[-1] if stack else "other"] += t0 - self._since
        totals[phase] += t1 - t0
        self._since = t1

    @property
    def active(self) -> str | None:
        return self.stack[-1] if self.stack else None

    def drop_step(self) -> None:
        """Close the current step without keeping its times (a step nobody will read): the next one
        starts now, in the same totals, zeroed (nothing to allocate)."""
        self._since = self.step_started = self.now()
        self.totals.update(_ZERO)

    def end_step(self) -> tuple[float, dict[str, float]]:
        """Close the current step: (its wall seconds, seconds per phase); open the next one."""
        t = self.now()
        totals = self.totals
        totals[self.stack[-1] if self.stack else "other"] += t - self._since
        self._since = t
        wall = t - self.step_started
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.step_started = t
        return wall, totals
