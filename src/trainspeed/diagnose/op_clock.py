"""The CPU window's op times on their phase's clock.

The window times each op one call at a time (`watch.op_counter`), and each call's time then carries some of the
timing's own cost: the dispatch mode's Python between two calls leaves the next one colder. On steps of many small
ops it is most of a call's time, and the ops of a phase add to more than the phase itself, timed on steps without
the counter (a sequence model's listed backward ops: 13.25 ms in a 7.19 ms backward; an LBFGS script's: 3,026 ms in
1,233 ms). Such a figure cannot be the op's: where a phase's ops outgrow it, one excess a call is taken off every call
alike (an op whose calls are shorter than it reads 0, and the rest share its part), so that the phase's ops add to
the phase, and the report says by how much each call was shortened.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainspeed.watch.result import OpTime, WatchResult


@dataclass(frozen=True)
class PhaseOps:
    """A phase's ops in the window against the phase's own time, per step."""

    phase: str
    ops: tuple[tuple[float, float], ...]
    """Each op's (calls, milliseconds) per step as the window timed it, one call at a time."""
    phase_ms: float
    """The phase's median milliseconds per step (the phase table's)."""

    @property
    def calls(self) -> float:
        return sum(calls for calls, _ in self.ops)

    @property
    def ops_ms(self) -> float:
        return sum(ms for _, ms in self.ops)

    @property
    def excess_us(self) -> float:
        """Microseconds taken off each call so that the ops add to the phase (`shortened`); 0 where they fit in it."""
        if self.ops_ms <= self.phase_ms:
            return 0.0
        # the excess a call is the one at which the ops' calls, each shortened by it (to 0 at the least), add to the
        # phase: with the ops by time a call, those that reach 0 leave the excess to the calls of the rest
        rows = sorted((ms / calls, calls) for calls, ms in self.ops if calls > 0)
        left_ms, left_calls = self.ops_ms, self.calls
        for per_call, calls in rows:
            excess = (left_ms - self.phase_ms) / left_calls
            if excess <= per_call:
                return excess * 1e3
            left_ms -= per_call * calls
            left_calls -= calls
        return rows[-1][0] * 1e3 if rows else 0.0  # a phase of no time: every call to 0

    def shortened(self, calls: float, ms: float) -> float:
        """An op's milliseconds with each of its `calls` shortened by `excess_us` (to 0 at the least)."""
        if not calls or not (excess := self.excess_us):
            return ms
        return calls * max(0.0, ms / calls - excess / 1e3)


def phase_ops(w: WatchResult, phase: str) -> PhaseOps | None:
    """`phase`'s ops in the window against the phase; None where the window timed none of its ops."""
    ops = w.window.op_calls_by_phase.get(phase)
    stat = w.phases.get(phase)
    if stat is None or not ops:
        return None
    return PhaseOps(phase, tuple(ops), stat.host_ms)


def on_phase_clock(w: WatchResult, op: OpTime) -> float:
    """`op`'s milliseconds per step with each of its calls shortened by its phase's excess (`PhaseOps.excess_us`):
    the time the report lists."""
    ops = phase_ops(w, op.phase) if op.phase is not None else None
    return op.ms if ops is None else ops.shortened(op.calls, op.ms)


def outgrown(w: WatchResult, phases: tuple[str, ...]) -> list[PhaseOps]:
    """Of `phases`, those whose ops the window timed at more than the phase's own time."""
    found = [phase_ops(w, p) for p in phases]
    return [ops for ops in found if ops is not None and ops.excess_us > 0]
