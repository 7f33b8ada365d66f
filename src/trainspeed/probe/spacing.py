"""The pauses between a probe's rounds, filled with the other probes' work instead of sleep.

The probes that compare two rates (`matmul.dtype_ratios`, `matmul.thread_gflops`, `thread_step.thread_step_ms`)
measure in rounds `ROUND_PAUSE_S` apart, so that a slow stretch of a shared machine falls on one round. What matters
is the time between the rounds, not that the process sleeps through it: the probes no round depends on (the
optimizer's step, the cell loop against its fused layer, a loader's handover) run there, and the doctor's time after
the script shrinks by the sleeps they fill (0.3 s of each such probe's three rounds).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class Spacer:
    """A pause (`Spacer(seconds)`) that runs the queued probes, one after the other, until `seconds` have passed, and
    sleeps what is left of them; `results()` runs the rest and gives each probe's result by its name."""

    def __init__(self, work: dict[str, Callable[[], Any]], sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.queue = list(work.items())
        """The probes not run yet, in the order given."""
        self.done: dict[str, Any] = {}
        self.sleep = sleep
        self.clock = clock

    def __call__(self, seconds: float) -> None:
        end = self.clock() + seconds
        while self.queue and self.clock() < end:
            self._next()
        left = end - self.clock()
        if left > 0:
            self.sleep(left)

    def results(self) -> dict[str, Any]:
        while self.queue:
            self._next()
        return self.done

    def _next(self) -> None:
        name, probe = self.queue.pop(0)
        self.done[name] = probe()
