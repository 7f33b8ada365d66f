"""A recurrent cell (or a stack of them) stepped over a sequence in Python against the fused layer over the same
sequence.

An `nn.LSTMCell` called once per time step pays every op of the cell, forward and backward, per step of the
sequence; `nn.LSTM` runs the sequence as one op (its own fused kernel, cuDNN's on a GPU), a stack of cells with
`num_layers`. The probe times both, forward and backward, on fresh modules of the run's sizes and dtype and fresh
inputs of its batch and length: nothing of the user's (weights, data, gradients) is touched.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from trainspeed.load.probes import on_free_cores, probe_waits
from trainspeed.probe.readings import PROBE_STEPS
from trainspeed.threads import intra_op_threads
from trainspeed.watch.cells import CellLoop
from trainspeed.watch.op_counter import op_counter

PROBE_ELEMENTS = 50_000_000
"""Sequences of more elements than this (batch x length x width) are not probed."""
PROBE_S = 0.25
"""About the most the probe's timed rounds take: a long sequence's rounds are fewer (`_rounds`), down to
LEAST_ROUNDS (five rounds of an LBFGS script's cell loop were a third of the doctor's time after it: BENCHMARKS.md,
"Where the code's constants come from")."""
LEAST_ROUNDS = 3


def _module(loop: CellLoop, kind: str, device: str, input_size: int | None = None, **extra: Any) -> nn.Module:
    """A fresh `torch.nn.<kind>` of the loop's sizes, bias and nonlinearity (a cell, or the fused layer)."""
    if loop.nonlinearity:
        extra["nonlinearity"] = loop.nonlinearity
    size = loop.input_size if input_size is None else input_size
    return getattr(nn, kind)(size, loop.hidden_size, bias=loop.bias, **extra).to(device, getattr(torch, loop.dtype))


def _cells(loop: CellLoop, device: str) -> list[nn.Module]:
    """The loop's stack of fresh cells: the first of its input size, each next one fed the last one's output."""
    return [_module(loop, loop.kind, device, loop.input_size if i == 0 else loop.hidden_size)
            for i in range(loop.layers)]


def _step_through(cells: list[nn.Module], loop: CellLoop, x: torch.Tensor) -> None:
    """The stack of cells called once per time step of `x` (batch, time, features) from zero states, each fed the
    last one's output, forward and backward."""
    h = torch.zeros(x.shape[0], loop.hidden_size, device=x.device, dtype=x.dtype)
    lstm = loop.kind == "LSTMCell"
    states: list[Any] = [(h, torch.zeros_like(h)) if lstm else h for _ in cells]
    outs = []
    for t in range(x.shape[1]):
        out = x[:, t]
        for i, cell in enumerate(cells):
            states[i] = cell(out, states[i])
            out = states[i][0] if lstm else states[i]
        outs.append(out)
    torch.stack(outs, 1).sum().backward()


def _rounds(first_s: float, repeats: int) -> int:
    """The timed rounds after an untimed first one of `first_s` seconds: `repeats`, fewer where they would take more
    than PROBE_S (LEAST_ROUNDS at the least, or `repeats` where that is less)."""
    fit = int(PROBE_S / first_s) if first_s > 0 else repeats
    return min(repeats, max(LEAST_ROUNDS, fit))


WARM_S = 0.02
"""A run whose settled call took less than this is called once more, untimed, before each timed call of a round: its
first call after the other run's finds the caches the other left (a short run's time is mostly that: the fused layer
read 0.31 to 0.39 of the stepped cell's time so, where training steps of its own run it at 0.26 to 0.28; BENCHMARKS.md,
"Where the code's constants come from"). A longer run's time is its own, and its untimed call would double the probe's
time after the script (an LBFGS script's cell loop over 400 time steps)."""


SETTLE_S = 0.1
SETTLE_CALLS = 3
SETTLED = 0.8
"""A run whose first call took less than SETTLE_S is called again before its rounds, up to SETTLE_CALLS times, until a
call takes SETTLED of the one before or more: a layer's first calls in a process (nn.LSTM's on a CPU: 35, 2.5, 1.8 ms,
then 1.5 ms) take longer than its steps, and the doctor's probe is often the process's first use of the fused layer
(the script stepped the cell); a cell the script stepped is settled at its second call."""


def _settle(run: Callable[[], None], clock: Callable[[], float], first: float) -> bool:
    """Call a run until it settles (`SETTLED`), its first call having taken `first` seconds by `clock`; whether its last
    call took less than WARM_S (a short run, called once untimed before each timed call)."""
    took = first
    for _ in range(SETTLE_CALLS):
        t0 = clock()
        run()
        last, took = took, clock() - t0
        if took >= SETTLED * last:
            break
    return took < WARM_S


def _one_thread_ms(runs: list[Callable[[], None]], repeats: int) -> list[float]:
    """Each run's median milliseconds of this thread's CPU time on one intra-op thread, the runs taken in turn (a CPU
    run's backward runs on the calling thread), a short one after an untimed call of its own (`WARM_S`): its work,
    whether or not other processes hold the cores."""
    readings: list[list[float]] = [[] for _ in runs]
    short = [False] * len(runs)
    with intra_op_threads(1):
        i, rounds = 0, repeats
        while i <= rounds:  # the first calls build caches: untimed
            first = 0.0
            for j, (run, kept) in enumerate(zip(runs, readings)):
                if short[j]:
                    run()
                t0 = time.thread_time()
                run()
                took = time.thread_time() - t0
                if i:
                    kept.append(took * 1e3)
                elif took < SETTLE_S:
                    short[j] = _settle(run, time.thread_time, took)
                first += took
            if not i:
                rounds = _rounds(first, repeats)
            i += 1
    return [statistics.median(kept) for kept in readings]


def _medians_ms(runs: list[Callable[[], None]], repeats: int, device: str,
                waited: Callable[[], float] | None) -> list[float]:
    """Each run's median milliseconds, the runs taken in turn (a load that comes and goes falls on them alike), a short
    one after an untimed call of its own (`WARM_S`), of the readings taken on free cores, else of each reading without
    its threads' waits (`load.probes.on_free_cores`). Beside busy processes the plain readings once put the fused layer
    slower than the stepped cell it replaces, and the readings less their waits moved the stepped cell's time
    (BENCHMARKS.md, "Where the code's constants come from"; `cell_loop_ms`'s `loaded`)."""
    cuda = device.startswith("cuda")
    readings: list[list[tuple[float, float, float]]] = [[] for _ in runs]
    short = [False] * len(runs)
    threads = torch.get_num_threads()
    with probe_waits(None if cuda else waited, native=not cuda) as wait:
        i, rounds = 0, repeats
        while i <= rounds:  # the first calls build caches (cuDNN's plan, the allocator's blocks): untimed
            start = time.perf_counter()
            for j, (run, kept) in enumerate(zip(runs, readings)):
                if short[j]:
                    run()
                if cuda:
                    torch.cuda.synchronize()
                wait()
                t0 = time.perf_counter()
                run()
                if cuda:
                    torch.cuda.synchronize()
                wall = time.perf_counter() - t0
                waited_s = 0.0 if cuda else min(wait(), wall)
                if i:
                    kept.append((wall, waited_s, wait.longest(waited_s, threads)))
                elif wall < SETTLE_S:
                    short[j] = _settle(run, time.perf_counter, wall)
            if not i:
                rounds = _rounds(time.perf_counter() - start, repeats)
            i += 1
    return [statistics.median(on_free_cores(kept)) * 1e3 for kept in readings]


def cell_loop_ms(loop: CellLoop, batch: int, length: int, device: str = "cpu", repeats: int = 5,
                 waited: Callable[[], float] | None = None, loaded: bool = False) -> tuple[float, float] | None:
    """(the cell stepped over `length` steps, the fused layer over the same sequence) in milliseconds, forward and
    backward, on a batch of `batch`, the medians of `repeats` rounds (fewer for a long sequence: `PROBE_S`), the
    stepped loop over a sequence longer than PROBE_STEPS timed over that many steps and scaled to its length; None
    where the sequence is too large to probe or a length under 2. `waited`: the seconds the threads waited for a core
    since it was last called (a test's; by default Linux's run-queue counts of this thread and torch's intra-op
    threads). `loaded` (other processes hold the cores; a CPU run): both timed on one
    intra-op thread by its CPU time (`_one_thread_ms`), whose ratio the load leaves as it is (BENCHMARKS.md, "Where the
    code's constants come from")."""
    if length < 2 or batch < 1 or batch * length * max(loop.input_size, loop.hidden_size) > PROBE_ELEMENTS:
        return None
    cells = _cells(loop, device)
    fused = _module(loop, loop.fused, device, batch_first=True, num_layers=loop.layers)
    x = torch.randn(batch, length, loop.input_size, device=device, dtype=getattr(torch, loop.dtype))
    timed = min(length, PROBE_STEPS)
    part = x[:, :timed]

    def stepped() -> None:
        _step_through(cells, loop, part)

    def whole() -> None:
        out, _ = fused(x)
        out.sum().backward()

    if loaded and not device.startswith("cuda"):
        cell_ms, fused_ms = _one_thread_ms([stepped, whole], repeats)
    else:
        cell_ms, fused_ms = _medians_ms([stepped, whole], repeats, device, waited)
    return cell_ms * length / timed, fused_ms


def cell_call_ops(loop: CellLoop, device: str = "cpu") -> int | None:
    """The aten ops one call of the cell adds to a training step, forward and backward (with the calls of the cells
    stacked on it: `CellLoop.layers`): the ops of the stepped loop over three time steps less those over two (what the
    sequence's set-up and its loss add is in both), counted on a batch of two (an op's count does not depend on its
    size). With the run's cell calls a step it is the loop's share of the step's ops, which a load that stretches every
    op alike leaves as it is (`rules.launch`). None where the count came out at nothing (a cell whose calls run no aten
    op)."""
    cells = _cells(loop, device)
    counts = []
    for length in (2, 3):
        x = torch.randn(2, length, loop.input_size, device=device, dtype=getattr(torch, loop.dtype))
        counter = op_counter()
        with counter:
            _step_through(cells, loop, x)
        counts.append(counter.ops)
    per_call = counts[1] - counts[0]
    return per_call if per_call > 0 else None
