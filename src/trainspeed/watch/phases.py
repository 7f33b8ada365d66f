"""Split host time into phases: exclusive time, so a sync inside forward is not counted twice."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

PHASES = ("data", "h2d", "forward", "backward", "optimizer", "sync", "checkpoint", "comm", "other")
"""`comm`: DDP's gradient all-reduce where backward could not hide it (see watch/comm.py); the
phase clock itself never opens it: the watcher moves that time out of backward (or other) per step."""


_ZERO = dict.fromkeys(PHASES, 0.0)

SUMMED = ("data", "h2d", "sync", "checkpoint")
"""Phases the clock also keeps running sums of, once `start_sums()` is called: they are timed on
every step by hooks that run a few times per step at most, and a rare one (a checkpoint every 1000
steps) must not depend on whether a sample of steps happens to hold it."""

EDGE_PHASES = ("data", "h2d", "sync", "checkpoint", "comm")
"""Phases timed on every step: their hooks run a few times per step at most (and catch rare events
such as a checkpoint every 1000 steps)."""

CALL_PHASES = ("forward", "backward", "optimizer", "other")
"""Phases split out only on detailed steps (their hooks run on every module call); on the other
steps their time all falls into `other`. The clock sums them over the detailed steps only."""


class Listener(Protocol):
    """Told each stretch of host time as the clock charges it, on detailed steps (`PhaseClock.listen`): the load's
    `WaitMeter`, which charges the threads' waits for a core to the same phases."""

    def charged(self, phase: str, seconds: float) -> None:
        """`seconds` since the last edge went to `phase`."""

    def skipped(self) -> None:
        """The time since the last edge was nobody's."""

    def forget(self) -> None:
        """What came before is no phase's: the step counts from now."""

    def closed(self) -> None:
        """The step closed (its last stretch told)."""


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
        self.sums: dict[str, float] | None = None
        """Seconds in each of SUMMED over the steps closed since `start_sums()` (None before)."""
        self.sums_from = 0.0
        """When the first summed step started; the sums cover up to `step_started`."""
        self.skipped = 0.0
        """Seconds since `sums_from` that were no step's (`skip()`, `restart()`): out of the summed wall."""
        self.detailed = True
        """Whether the step now running is detailed (its CALL_PHASES split out): set by the watcher."""
        self.call_sums: dict[str, float] | None = None
        """Seconds in each of CALL_PHASES over the detailed steps closed since `start_sums()`."""
        self._listener: Listener | None = None
        self.listener: Listener | None = None
        """Told each stretch as it is charged (`listen`), on detailed steps only; None on the others."""

    def start_sums(self) -> None:
        """Sum SUMMED over every step closed from now on (the one that starts now is the first), and
        CALL_PHASES over the detailed ones among them."""
        self.sums = dict.fromkeys(SUMMED, 0.0)
        self.call_sums = dict.fromkeys(CALL_PHASES, 0.0)
        self.sums_from = self.step_started
        self.skipped = 0.0

    def forget_sums(self) -> None:
        """Sum nothing again until `start_sums()` (the watcher starts measuring over)."""
        self.sums = self.call_sums = None
        self.skipped = 0.0

    def _fold(self, totals: dict[str, float]) -> None:
        sums = self.sums
        if sums is not None:  # SUMMED, unrolled: this runs on every closed step
            sums["data"] += totals["data"]
            sums["h2d"] += totals["h2d"]
            sums["sync"] += totals["sync"]
            sums["checkpoint"] += totals["checkpoint"]
            calls = self.call_sums
            if self.detailed and calls is not None:
                calls["forward"] += totals["forward"]
                calls["backward"] += totals["backward"]
                calls["optimizer"] += totals["optimizer"]
                calls["other"] += totals["other"]

    def summed(self) -> tuple[dict[str, float], float] | None:
        """(seconds per SUMMED phase, wall seconds) over the steps summed so far; None before any."""
        if self.sums is None or self.step_started <= self.sums_from:
            return None
        return dict(self.sums), self.step_started - self.sums_from - self.skipped

    def call_split(self) -> dict[str, float] | None:
        """Seconds per CALL_PHASES over the detailed steps summed so far; None before any."""
        calls = self.call_sums
        if calls is None or not any(calls.values()):
            return None
        return dict(calls)

    def listen(self, listener: Listener | None) -> None:
        """Tell `listener` each stretch of host time as it is charged to a phase, on detailed steps, from now on."""
        self._listener = listener
        self.set_detailed(self.detailed)

    def enter(self, phase: str) -> None:
        t = self.now()
        stack = self.stack
        if self.listener is not None:
            self.listener.charged(stack[-1] if stack else "other", t - self._since)
        self.totals[stack[-1] if stack else "other"] += t - self._since
        self._since = t
        stack.append(phase)

    def exit(self, phase: str) -> None:
        t = self.now()
        stack = self.stack
        if self.listener is not None:
            self.listener.charged(stack[-1] if stack else "other", t - self._since)
        self.totals[stack[-1] if stack else "other"] += t - self._since
        self._since = t
        if stack and stack[-1] == phase:
            stack.pop()
            return
        # an exception unwound past an inner phase: pop down to `phase`
        while stack:
            if stack.pop() == phase:
                break

    def leave(self, depth: int) -> None:
        """Close every phase opened above the first `depth` of the stack (a wrapper that entered at that
        depth returns, or unwinds past phases its callee opened and never closed)."""
        t = self.now()
        stack = self.stack
        if self.listener is not None:
            self.listener.charged(stack[-1] if stack else "other", t - self._since)
        self.totals[stack[-1] if stack else "other"] += t - self._since
        self._since = t
        del stack[depth:]

    def span(self, phase: str, t0: float, t1: float) -> None:
        """`phase` ran from t0 to t1 (both after the last edge): the time before t0 goes to the
        open phase, t0..t1 to `phase`. One call where enter + exit would take two."""
        totals = self.totals
        stack = self.stack
        totals[stack[-1] if stack else "other"] += t0 - self._since
        if self.listener is not None:
            self.listener.charged(phase, t1 - self._since)  # the wait since the last edge: most of it in the span
        totals[phase] += t1 - t0
        self._since = t1

    @property
    def summing(self) -> bool:
        """Whether the measured steps' sums have started (`start_sums()`)."""
        return self.sums is not None

    def add(self, phase: str, seconds: float) -> None:
        """`seconds` more in `phase` for the step now running (time measured apart: a quiet run's reads)."""
        self.totals[phase] += seconds

    def set_detailed(self, detailed: bool) -> None:
        """The step that starts now is detailed (its CALL_PHASES split out) or edges-only."""
        self.detailed = detailed
        self.listener = self._listener if detailed else None
        if self.listener is not None:
            self.listener.forget()

    def move_summed(self, phase: str, seconds: float) -> None:
        """`seconds` of the detailed step just closed were not `phase`'s after all (a DDP all-reduce the step
        waited on): out of the sums over the detailed steps, where that step was summed already."""
        calls = self.call_sums
        if self.detailed and calls is not None:
            calls[phase] -= seconds

    @property
    def active(self) -> str | None:
        return self.stack[-1] if self.stack else None

    def restart(self) -> None:
        """The step now running starts over from now: what it ran so far is nobody's (the watcher's own
        work between two steps)."""
        t = self.now()
        self.skipped += t - self.step_started
        self._since = self.step_started = t
        self.totals.update(_ZERO)
        if self.listener is not None:
            self.listener.forget()

    def skip(self) -> None:
        """The time since the last edge (or since the last open or close of a phase) was the watcher's
        own (its bookkeeping at a step's end, a CUDA event at a phase edge): it is no phase's, and
        the step now running starts that much later."""
        t = self.now()
        gap = t - self._since
        self._since = t
        self.step_started += gap
        self.skipped += gap
        if self.listener is not None:
            self.listener.skipped()

    def drop_step(self) -> None:
        """Close the current step without keeping its times (a step nobody will read; they still go
        into the sums): the next one starts now, in the same totals, zeroed (nothing to allocate)."""
        t = self.now()
        totals = self.totals
        totals[self.stack[-1] if self.stack else "other"] += t - self._since
        self._since = self.step_started = t
        self._fold(totals)
        totals.update(_ZERO)
        if self.listener is not None:
            self.listener.forget()

    def end_step(self) -> tuple[float, dict[str, float]]:
        """Close the current step: (its wall seconds, seconds per phase); open the next one."""
        t = self.now()
        totals = self.totals
        if self.listener is not None:
            self.listener.charged(self.stack[-1] if self.stack else "other", t - self._since)
            self.listener.closed()
        totals[self.stack[-1] if self.stack else "other"] += t - self._since
        self._since = t
        wall = t - self.step_started
        self._fold(totals)
        self.totals = _ZERO.copy()
        self.step_started = t
        return wall, totals
