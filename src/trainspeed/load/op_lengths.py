"""How long a phase's ops run against how long its threads wait for a core: which end of the waits' bounds holds.

A parallel op's threads each do their part and meet at its end. Where the op is short against a wait for a core (the
scheduler's slices), a thread that waits stalls every op in that time, and the phase lost the time at least one thread
waited (`waits.joint_wait`). Where the op is long against a wait, each thread's part goes on while the other waits, the
op ends when the slower part does, and the phase lost about the longest one thread's wait. A simulation of two threads
running and waiting at random put the phase's loss at L / (L + c) of the way from the joint wait to the longest, L an
op's length and c the mean wait (BENCHMARKS.md, "Where the code's constants come from").

The window's ops (`watch.op_counter.OpCounter`, the profiler window's steps right after the warm-up) give each phase's
op lengths: each call's work at its op's least time per unit of work, weighted by its share of the phase's op time
(`phase_op_lengths`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

OpLengths = Sequence[tuple[float, float]]
"""A phase's ops: (share of the phase's op time, seconds per call) each."""

OpKey = tuple[Any, Any]
"""(op overload packet, dtype): an op of the profiler window."""

SizedOp = tuple[Any, Any, int]
"""(op overload packet, dtype, its work in a call: FLOPs where torch has a formula, else the elements it gave)."""


def phase_op_lengths(least_per_work: Mapping[OpKey, float],
                     phase_calls: Mapping[str, Counter[SizedOp]]) -> dict[str, OpLengths]:
    """Each phase's op lengths from the window's ops: a call's work (FLOPs, or elements given) at its op's least
    wall seconds per unit of work over the window's calls, weighted by the op's calls in the phase times that.

    The least wall time: a wait for a core only adds to it, and among an op's calls some ran while every thread had
    its core. Per unit of work, not per call: a convolution's or a product's calls of every shape count towards its
    rate (the least call of one shape, with few calls in the window, may have stalled in every one). A call's wall
    time less its threads' wait does not measure an op long against a wait beside busy processes: a thread's wait is
    counted as it gets its core back, its start perhaps before the call, and a matrix library shares a product's work
    among the threads that run; such an op, stretched in every call, errs towards the longest wait, as the op does."""
    out: dict[str, OpLengths] = {}
    for phase, calls in phase_calls.items():
        lengths = {op: op[2] * least_per_work[op[:2]] for op in calls if op[:2] in least_per_work}
        total = sum(calls[op] * length for op, length in lengths.items())
        if total > 0.0:
            out[phase] = tuple((calls[op] * length / total, length) for op, length in lengths.items() if length > 0.0)
    return out
