"""A watched run's timeline, for `trainspeed doctor --trace`: which phase ran when, step by step.

Only a `Watcher(trace=True)` records: its phase clock is a `TracingClock`, which notes each stretch of host
time as the plain clock charges it to a phase (data, h2d, forward, backward, optimizer, sync, checkpoint,
other), and each host read with the `file:line` that made it. Stretches the clock skips (the watcher's own
work at a step's end, a CUDA event's recording) are gaps. Steps are kept as the per-step plots keep them:
the detailed steps, at most PLOT_STEPS of them, so a million-step run's trace is as large as a short one's;
the clock stops noting once they are full. On CUDA each kept step also gets its phases' device spans, from
the same CUDA events as `device_ms`, placed from the step's first event; when the profiler window ran as
torch.profiler (CUDA, or a CPU run with torch.compile'd code), its ops and kernels come along.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from trainspeed.watch.phases import PhaseClock

Segment = tuple[str, float, float]
"""(phase, start, end), seconds on the watcher's clock (time.perf_counter)."""


@dataclass
class TraceStep:
    """One kept step's timeline."""

    index: int
    start: float
    end: float
    segments: list[Segment]
    reads: list[tuple[str, str, float, float, bool]] = field(default_factory=list)
    """(op, `file:line`, start, end, host) of each host read (`host`: of a CPU tensor, no synchronisation)."""
    device: list[Segment] = field(default_factory=list)
    """CUDA: (phase, start, end) of each phase's device span, seconds from the step's first CUDA event."""

    def placed_on_device(self, spans: list[Segment]) -> None:
        """The step's CUDA events have completed: its phases' device spans."""
        self.device = spans


@dataclass(frozen=True)
class WindowOp:
    """An op or kernel of the profiler window, placed from the window's start (approximately: torch.profiler
    counts from its own start, a few microseconds after the watcher's clock read)."""

    name: str
    track: str
    """"host" or "device"."""
    start: float
    end: float


@dataclass(frozen=True)
class Trace:
    steps: list[TraceStep]
    ops: list[WindowOp]
    device: str
    notes: list[str] = field(default_factory=list)


class TracingClock(PhaseClock):
    """The phase clock, also noting each stretch of host time it charges, and the host reads, while
    `recording`. Each method lets the plain clock do its arithmetic, then notes what it charged."""

    def __init__(self, now: Callable[[], float]) -> None:
        super().__init__(now)
        self.recording = True
        self.segments: list[Segment] = []
        self.reads: list[tuple[str, str, float, float, bool]] = []
        self.last_step: TraceStep | None = None
        """The step `end_step` closed last, with what was noted in it (index -1 until `take_step` numbers it)."""

    def _note(self, phase: str, t0: float, t1: float) -> None:
        if not self.recording or t1 <= t0:
            return
        segments = self.segments
        if segments and segments[-1][0] == phase and segments[-1][2] == t0:
            segments[-1] = (phase, segments[-1][1], t1)  # the same phase, resumed at once
        else:
            segments.append((phase, t0, t1))

    def enter(self, phase: str) -> None:
        open_phase, since = self.active or "other", self._since
        super().enter(phase)
        self._note(open_phase, since, self._since)

    def exit(self, phase: str) -> None:
        open_phase, since = self.active or "other", self._since
        super().exit(phase)
        self._note(open_phase, since, self._since)

    def leave(self, depth: int) -> None:
        open_phase, since = self.active or "other", self._since
        super().leave(depth)
        self._note(open_phase, since, self._since)

    def span(self, phase: str, t0: float, t1: float) -> None:
        open_phase, since = self.active or "other", self._since
        super().span(phase, t0, t1)
        self._note(open_phase, since, t0)
        self._note(phase, t0, t1)

    def take_step(self, index: int) -> TraceStep | None:
        """The step closed last, numbered `index` (None: none noted)."""
        return replace(self.last_step, index=index) if self.last_step is not None else None

    def record(self, recording: bool) -> None:
        """Note the stretches and reads from now on, or not (the kept steps' timelines are full)."""
        self.recording = recording

    def read(self, op: str, site: str, t0: float, t1: float, host: bool = False) -> None:
        """A host read ran from t0 to t1 at `site`: of a device tensor (its time is the sync phase's, noted by
        `span`), or of a CPU tensor (`host`: its time is the phase's it ran in)."""
        if self.recording:
            self.reads.append((op, site, t0, t1, host))

    def restart(self) -> None:
        super().restart()
        self.segments, self.reads = [], []

    def drop_step(self) -> None:
        super().drop_step()
        self.segments, self.reads = [], []

    def end_step(self) -> tuple[float, dict[str, float]]:
        open_phase, since, started = self.active or "other", self._since, self.step_started
        closed = super().end_step()
        self._note(open_phase, since, self.step_started)
        # where the step began on the clock: its first stretch (the plain clock moves its start past skipped time)
        start = min(started, self.segments[0][1]) if self.segments else started
        self.last_step = TraceStep(-1, start, self.step_started, self.segments, self.reads)
        self.segments, self.reads = [], []
        return closed
