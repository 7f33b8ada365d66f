"""How fast this CPU multiplies matrices: the rate a step's arithmetic could run at."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator

import torch

from trainspeed.load.probes import on_free_cores, probe_waits
from trainspeed.threads import intra_op_threads


def cpu_matmul_gflops(n: int = 256, repeats: int = 5, inner: int = 10,
                      now: Callable[[], float] = time.perf_counter, dtype: torch.dtype = torch.float32,
                      waited: Callable[[], float] | None = None) -> float:
    """Median GFLOP/s of an n x n matmul in `dtype` (float32 by default) on the CPU with torch's current threads, of the
    readings taken on free cores. `waited` gives the seconds the threads waited for a core since it was last called (by
    default Linux's run-queue counts of this thread and torch's intra-op threads, `load.waits`): where every reading
    waited more than `load.probes.FREE_CORE` of its time, each counts without its waits (`load.probes.on_free_cores`:
    between its time less the threads' summed wait and less the longest one's). Beside busy processes the plain rate
    reads a small part of the CPU's, and every step of the run looks compute-bound; the whole summed wait taken off
    takes a product's time to nothing (BENCHMARKS.md, "Where the code's constants come from")."""
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    threads = torch.get_num_threads()
    with probe_waits(waited) as wait, torch.no_grad():
        for _ in range(3):
            torch.mm(a, b)
        readings = []
        for _ in range(repeats):
            wait()
            t0 = now()
            for _ in range(inner):
                torch.mm(a, b)
            wall = now() - t0
            summed = min(wait(), wall)
            readings.append((wall, summed, wait.longest(summed, threads)))
    times = on_free_cores(readings)
    return statistics.median(2 * n**3 * inner / t / 1e9 for t in times)


AGREE = 0.8  # two matmul readings within a fifth of each other agree


def settled_gflops(earlier: list[float], measure: Callable[[], float] = cpu_matmul_gflops,
                   pause: Callable[[float], None] = time.sleep, pause_s: float = 0.1, more: int = 4) -> float:
    """What this CPU's matmul can do: the fastest of the `earlier` readings and one taken now. A reading lasts about 10
    ms, and on a shared machine another tenant can hold a core for a while: one reading in seven read the one-thread
    rate at two threads (BENCHMARKS.md, "Where the code's constants come from"), and arithmetic counted at that rate
    passes launch_bound's bar. Where the readings disagree (the slowest under AGREE of the fastest), up to `more`
    follow, after pauses that double from `pause_s`, until one agrees with the fastest before it; the fastest is kept,
    as a benchmark keeps its fastest round."""
    rates = [*earlier, measure()]
    agreed = min(rates) >= AGREE * max(rates)
    for i in range(more):
        if agreed:
            break
        pause(pause_s * 2**i)
        rates.append(measure())
        agreed = rates[-1] >= AGREE * max(rates[:-1])
    return max(rates)


ROUND_PAUSE_S = 0.15
"""The pause between rounds of the probes that compare two rates (`dtype_ratios`, `thread_gflops`): a shared
machine slows a core for tens to hundreds of milliseconds at a time, and rounds spread over a third of a second,
each rate's fastest kept, keep one slow stretch from reading as the hardware's. The doctor fills the pauses with its
other probes (`probe.spacing.Spacer`)."""


def _rounds_apart(rounds: int, pause: Callable[[float], None], pause_s: float) -> Iterator[int]:
    """0 to rounds - 1, with a pause of `pause_s` between rounds."""
    for i in range(rounds):
        if i:
            pause(pause_s)
        yield i


def dtype_ratios(dtypes: list[str], rounds: int = 3, pause: Callable[[float], None] = time.sleep,
                 pause_s: float = ROUND_PAUSE_S) -> dict[str, float]:
    """Each dtype's matmul rate ("bfloat16") over float32's on this CPU, both on one thread timed by that thread's CPU
    time, measured in turn `rounds` times `pause_s` apart, each one's fastest. One thread's CPU time is its work whether
    or not other processes hold the cores, where two threads' rates by wall time less their waits scatter
    (BENCHMARKS.md, "Where the code's constants come from": a thread spinning at a product's barrier is on a core, and
    its partner's wait is not the product's). Rounds apart, not back to back: a slow stretch of a shared machine falls
    on one round. A CPU without native bfloat16 or float16 arithmetic multiplies those matrices about a hundred times
    slower than float32 (tens of ms per 256 x 256 product), so the others take 3 x 2 products a reading."""
    def rate(dtype: torch.dtype, inner: int) -> float:
        return cpu_matmul_gflops(repeats=3, inner=inner, dtype=dtype, now=time.thread_time, waited=lambda: 0.0)

    reference: list[float] = []
    rates: dict[str, list[float]] = {name: [] for name in dtypes}
    for _ in _rounds_apart(rounds, pause, pause_s):  # the pauses at the run's threads: other probes may fill them
        with intra_op_threads(1):
            reference.append(rate(torch.float32, 4))
            for name, into in rates.items():
                into.append(rate(getattr(torch, name), 2))
    return {name: max(into) / max(reference) for name, into in rates.items()}


def thread_gflops(n: int, threads: tuple[int, int], rounds: int = 3, pause: Callable[[float], None] = time.sleep,
                  pause_s: float = ROUND_PAUSE_S) -> tuple[float, float]:
    """GFLOP/s of an n x n float32 matmul at each of two thread counts (as configured, as advised), the two measured in
    turn, `rounds` times `pause_s` apart (`ROUND_PAUSE_S`); each count's fastest. Rounds back to back, each count's
    median, read two threads at the one-thread rate in a quarter of the doctor's tests' runs (BENCHMARKS.md, "Where the
    code's constants come from"). A repeat multiplies about 0.2 GFLOP, so that a large n stays a fraction of a second.
    """
    inner = max(1, round(0.2e9 / (2 * n**3)))
    rates: tuple[list[float], list[float]] = ([], [])
    for _ in _rounds_apart(rounds, pause, pause_s):
        for count, into in zip(threads, rates):
            with intra_op_threads(count):
                into.append(cpu_matmul_gflops(n=n, repeats=3, inner=inner))
    return max(rates[0]), max(rates[1])
