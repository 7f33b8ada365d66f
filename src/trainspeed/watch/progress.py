"""How a watched run is going, read while it runs: the live line's figures (`report/live.py`).

`progress_of` reads a `Watcher`'s parts from another thread (rich's refresh thread), never writing them: the step,
the steps a second, the median step of the steps kept so far, and their phase split. Reads of lists and dicts the
training thread is changing are copies taken whole under the GIL; a reading that raced a change is only late.
"""

from __future__ import annotations

import collections
import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trainspeed.watch.phases import EDGE_PHASES

if TYPE_CHECKING:
    from trainspeed.watch.session import Watcher

SUSPECT_SHARE = 0.15
"""An edge phase (data, h2d, sync, checkpoint, comm) of this share of the steps so far or more is the live line's
leading suspicion; the doctor's report judges it at the end."""


@dataclass(frozen=True)
class Progress:
    """The run so far, as the live line shows it."""

    step: int
    """The run's own step count now."""
    watching: bool
    """Whether the window is open (False: before it)."""
    window: str | None = None
    """The window asked ("50:150"), where there is one."""
    opens_at: int | None = None
    """The run's step the window opens at, while before it."""
    median_ms: float | None = None
    """The median of the steps kept so far (None: none yet)."""
    shares: dict[str, float] = field(default_factory=dict)
    """Each phase's share of the detailed steps kept so far."""

    @property
    def suspect(self) -> tuple[str, float] | None:
        """The edge phase with the largest share, where it is SUSPECT_SHARE or more."""
        edges = [(share, phase) for phase, share in self.shares.items() if phase in EDGE_PHASES]
        share, phase = max(edges, default=(0.0, ""))
        return (phase, share) if share >= SUSPECT_SHARE else None


def progress_of(w: Watcher) -> Progress:
    """`w`'s run so far (see the module's docstring)."""
    window = w.run_window
    spec = window.spec
    opened = window.opened_at
    if opened is None:
        return Progress(w.schedule.seen, False, spec.text if spec is not None else None,
                        spec.start if spec is not None else None)
    records = list(w.samples.measured.items)
    median = statistics.median(r.wall_s for r in records) * 1e3 if records else None
    detailed = [r for r in records if r.detailed]
    wall = sum(r.wall_s for r in detailed)
    shares: dict[str, float] = {}
    if wall > 0:
        for r in detailed:
            for phase, seconds in list(r.phases.items()):
                shares[phase] = shares.get(phase, 0.0) + seconds / wall
    return Progress(opened + w.schedule.seen, True, spec.text if spec is not None else None, None, median,
                    {p: s for p, s in shares.items() if s > 0})


class Rate:
    """Steps a second over the readings of the last `span_s` seconds (the live line reads twice a second)."""

    def __init__(self, span_s: float = 5.0) -> None:
        self.span_s = span_s
        self._readings: collections.deque[tuple[float, int]] = collections.deque()

    def read(self, step: int, now: float | None = None) -> float | None:
        """Steps a second up to `step`, read now; None until two readings a moment apart."""
        t = time.monotonic() if now is None else now
        readings = self._readings
        if readings and step < readings[-1][1]:  # counted anew (a window opened): the rate starts over
            readings.clear()
        readings.append((t, step))
        while len(readings) > 2 and t - readings[1][0] >= self.span_s:
            readings.popleft()
        t0, s0 = readings[0]
        return (step - s0) / (t - t0) if t - t0 > 0.2 else None
