"""How long a phase's ops run against how long its threads wait for a core: which end of the waits' bounds holds.

A parallel op's threads each do their part and meet at its end. Where the op is short against a wait for a core
(the scheduler's slices: 4 ms ticks on the 2-vCPU VM), a thread that waits stalls every op in that time, and the
phase lost the time at least one thread waited (`run_queue.joint_wait`). Where the op is long against a wait, each
thread's part goes on while the other waits, the op ends when the slower part does, and the phase lost about the
longest one thread's wait. Simulated (two threads each running and waiting for times drawn at random, 4 ms and
8 ms on average, ops of length L run back to back): the share of the way from the joint wait to the longest that
the phase's loss lies at came within 0.06 of L / (L + c) for L from 0.01 to 32 ms, c the mean wait (8 ms); with
waits of 8 ms exactly it went from 0 to 1 between L = 0.3 and 2 ms. Measured (`benchmarks/wait_estimates.py`, two
busy processes, Zen 4, 2026-11-29, the same recordings read both ways): `examples/wide_mlp.py`'s 11 ms matrix
products left backward and forward 0.35x and 0.41x their time alone by the joint wait, 0.96x and 1.09x so; the PIL
example's convolutions 0.55x and 0.50x, 1.27x and 1.08x; over seven examples' forward, backward and optimizer
phases the error came to 1.27x against 1.45x (the geometric mean); MLPs of 0.1 ms ops are left as they were.

The window's ops (`op_counter.OpCounter`, the profiler window's steps right after the warm-up) give each phase's op
lengths: each call's work at its op's least time per unit of work, weighted by its share of the phase's op time
(`phase_op_lengths`).
"""

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


def long_op_share(lengths: OpLengths, wait: float) -> float:
    """How far from the joint wait towards the longest one thread's wait a reading's loss lies, given its phase's
    ops and the mean length of one wait for a core in it (seconds): each op's share of the phase's time times
    L / (L + wait), summed. 0 where the ops are unknown or nothing waited."""
    if wait <= 0.0:
        return 0.0
    return min(1.0, sum(share * length / (length + wait) for share, length in lengths if length > 0.0))


def joined(joint: float, longest: float, lengths: OpLengths, wait: float) -> float:
    """What a reading lost: its joint wait moved towards its longest one thread's wait by `long_op_share`."""
    return joint - long_op_share(lengths, wait) * max(0.0, joint - longest)


def phase_op_lengths(least_per_work: Mapping[OpKey, float],
                     phase_calls: Mapping[str, Counter[SizedOp]]) -> dict[str, OpLengths]:
    """Each phase's op lengths from the window's ops: a call's work (FLOPs, or elements given) at its op's least
    wall seconds per unit of work over the window's calls, weighted by the op's calls in the phase times that.

    The least wall time: a wait for a core only adds to it, and among an op's calls some ran while every thread had
    its core (beside two busy processes, each thread waited two thirds of the time: a short call ran on free cores
    about one time in nine). Per unit of work, not per call: a convolution's or a product's calls of every shape
    count towards its rate (the least call of one shape, three calls in the window, had stalled in most runs). A
    call's wall time less its threads' wait does not measure an op long against a wait beside busy processes: a
    thread's wait is counted as it gets its core back, its start perhaps before the call, and a matrix library
    shares a product's work among the threads that run (`examples/wide_mlp.py`'s 11 ms products came to 0.16 ms a
    call less the summed waits, 0.46 ms of the calling thread's CPU time, 2026-11-29); such an op, stretched in
    every call, errs towards the longest wait, as the op does."""
    out: dict[str, OpLengths] = {}
    for phase, calls in phase_calls.items():
        lengths = {op: op[2] * least_per_work[op[:2]] for op in calls if op[:2] in least_per_work}
        total = sum(calls[op] * length for op, length in lengths.items())
        if total > 0.0:
            out[phase] = tuple((calls[op] * length / total, length) for op, length in lengths.items() if length > 0.0)
    return out
