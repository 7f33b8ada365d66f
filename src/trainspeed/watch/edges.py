"""The phase edges: the host clock, and on a detailed CUDA step a CUDA event at each edge of a device phase.

`PhaseEdges` owns the phase clock and the events of the step running now; `enter` and `exit` are what the hooks
call (the clock's own methods where no event is recorded: one Python frame per edge, not two).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from trainspeed.watch.phases import PhaseClock
from trainspeed.watch.trace import TracingClock

DEVICE_PHASES = ("h2d", "forward", "backward", "optimizer")
"""Phases whose device time is taken with CUDA events (the others do no device work of their own)."""


class PhaseEdges:
    """The phase clock (a TracingClock with trace=True) and the CUDA events of the step running now."""

    def __init__(self, now: Callable[[], float], trace: bool) -> None:
        self.clock: PhaseClock = TracingClock(now) if trace else PhaseClock(now)
        self.enter: Callable[[str], None] = self.clock.enter
        self.exit: Callable[[str], None] = self.clock.exit
        self.events: list[tuple[str, Any, Any]] = []
        """(phase, start, end) CUDA events of the step running now."""
        self._open: list[tuple[str, Any]] = []

    def events_on(self, on: bool) -> None:
        """Phase edges also record CUDA events (on the detailed steps of a CUDA run, and only there), or not. On
        the other steps only the copies to the device (h2d) have edges among the device phases; an event is a
        CUDA call or two, dear next to a tiny step, and the detailed steps (about one in `detail_every`, in runs
        placed at random) sample the copies' device spans well enough."""
        if on:
            self.enter, self.exit = self._enter_with_events, self._exit_with_events
        else:
            self.enter, self.exit = self.clock.enter, self.clock.exit

    def take_events(self) -> list[tuple[str, Any, Any]]:
        """The step's events, for its record; the next step's start empty."""
        events = self.events
        if events:
            self.events = []
        return events

    def open_host(self, phase: str) -> int:
        """Open `phase` on the host clock alone (no CUDA events); returns the depth `close_host` takes."""
        depth = len(self.clock.stack)
        self.clock.enter(phase)
        return depth

    def close_host(self, depth: int) -> None:
        self.clock.leave(depth)

    def hold(self, phase: str) -> bool:
        """End `phase`'s open CUDA span for a while, where it is the innermost open one: an optimizer's closure
        runs forward and backward inside the step (LBFGS, Lightning's automatic optimisation), and their kernels
        are theirs, not the optimizer's. True where a span was ended: `release` opens the phase's next one."""
        if not self._open or self._open[-1][0] != phase:
            return False
        _, start = self._open.pop()
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        self.events.append((phase, start, end))
        self.clock.skip()
        return True

    def release(self, phase: str) -> None:
        """Open `phase`'s CUDA span again after `hold`: the rest of the step is the optimizer's."""
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        self._open.append((phase, ev))
        self.clock.skip()

    def _enter_with_events(self, phase: str) -> None:
        """A phase edge on a detailed CUDA step: the host clock, then a CUDA event. Making and recording
        the event (a few us of the watcher's own) is skipped: no phase's, and not the step's."""
        self.clock.enter(phase)
        if phase in DEVICE_PHASES:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self._open.append((phase, ev))
            self.clock.skip()

    def _exit_with_events(self, phase: str) -> None:
        self.clock.exit(phase)
        if self._open and self._open[-1][0] == phase:
            _, start = self._open.pop()
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.events.append((phase, start, end))
            self.clock.skip()  # else the event's cost falls into "other", after the phase closed
