"""How fast this CPU multiplies matrices: the rate a step's arithmetic could run at."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator

import torch

from trainspeed.threads import intra_op_threads
from trainspeed.watch.run_queue import longest_of, on_free_cores, probe_waits


def cpu_matmul_gflops(n: int = 256, repeats: int = 5, inner: int = 10,
                      now: Callable[[], float] = time.perf_counter, dtype: torch.dtype = torch.float32,
                      waited: Callable[[], float] | None = None) -> float:
    """Median GFLOP/s of an n x n matmul in `dtype` (float32 by default) on the CPU with torch's current
    threads, of the readings taken on free cores. `waited` gives the seconds the threads waited for a core since
    it was last called (by default Linux's run-queue counts of this thread and torch's intra-op threads,
    `watch.run_queue`): where every reading waited more than `run_queue.FREE_CORE` of its time, each counts
    without its waits (`run_queue.on_free_cores`: between its time less the threads' summed wait and less the
    longest one's). Beside two busy processes on the 2-vCPU VM the plain rate read 6 GFLOP/s against about 300, and
    every step of the run looked compute-bound (2026-11-23); the whole summed wait taken off took a float64
    product's time to nothing and its rate to 67 million GFLOP/s (2026-11-28)."""
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
            readings.append((wall, summed, longest_of(wait, summed, threads)))
    times = on_free_cores(readings)
    return statistics.median(2 * n**3 * inner / t / 1e9 for t in times)


AGREE = 0.8  # two matmul readings within a fifth of each other agree


def settled_gflops(earlier: list[float], measure: Callable[[], float] = cpu_matmul_gflops,
                   pause: Callable[[float], None] = time.sleep, pause_s: float = 0.1, more: int = 4) -> float:
    """What this CPU's matmul can do: the fastest of the `earlier` readings and one taken now. A reading lasts about
    10 ms, and on a shared machine another tenant can hold a core for a while: in 300 readings taken in a row, 41
    read the one-thread rate at two threads (104 GFLOP/s against 194, a Zen 4 core pair of 2026-11-26), and the
    tabular example's arithmetic counted at that rate passed launch_bound's bar. Where the readings disagree (the
    slowest under AGREE of the fastest), up to `more` follow, after pauses that double from `pause_s`, until one
    agrees with the fastest before it; the fastest is kept, as a benchmark keeps its fastest round."""
    rates = [*earlier, measure()]
    agreed = min(rates) >= AGREE * max(rates)
    for i in range(more):
        if agreed:
            break
        pause(pause_s * 2**i)
        rates.append(measure())
        agreed = rates[-1] >= AGREE * max(rates[:-1])
    return max(rates)


def cpu_dtype_gflops(dtype: str) -> float:
    """The same probe in another dtype ("bfloat16"), kept short: a CPU without native bfloat16 or float16 arithmetic
    multiplies those matrices about a hundred times slower than float32 (1.3 GFLOP/s against 113 on a
    Zen 3 core pair: 25 ms per 256 x 256 product), so 3 x 2 products after 3 to warm up."""
    return cpu_matmul_gflops(repeats=3, inner=2, dtype=getattr(torch, dtype))


ROUND_PAUSE_S = 0.15
"""The pause between rounds of the probes that compare two rates (`paired_dtype_gflops`, `thread_gflops`): a shared
machine slows a core for tens to hundreds of milliseconds at a time, and rounds spread over a third of a second,
each rate's fastest kept, keep one slow stretch from reading as the hardware's."""


def _rounds_apart(rounds: int, pause: Callable[[float], None], pause_s: float) -> Iterator[int]:
    """0 to rounds - 1, with a pause of `pause_s` between rounds."""
    for i in range(rounds):
        if i:
            pause(pause_s)
        yield i


def paired_dtype_gflops(dtypes: list[str], rounds: int = 3, pause: Callable[[float], None] = time.sleep,
                        pause_s: float = ROUND_PAUSE_S) -> tuple[float, dict[str, float]]:
    """The float32 rate and each dtype's (as `cpu_dtype_gflops`), measured in turn, `rounds` times `pause_s` apart;
    each one's fastest. A rule that compares the two then compares moments alike: measured apart, a slow moment of a
    shared machine during the float32 probe alone (83 GFLOP/s against 152-156 in the runs before and after it,
    2026-11-23) brought float64 to 0.54 of float32, near the 0.6 that slow_dtype asks for, and once past it; and
    rounds back to back, each one's median, still let a slow stretch over most of them hide slow_dtype (a fresh-clone
    run of 2026-11-26, where float64 reads 80 GFLOP/s against 192)."""
    reference: list[float] = []
    rates: dict[str, list[float]] = {name: [] for name in dtypes}
    for _ in _rounds_apart(rounds, pause, pause_s):
        reference.append(cpu_matmul_gflops())
        for name, into in rates.items():
            into.append(cpu_matmul_gflops(repeats=1, inner=2, dtype=getattr(torch, name)))
    return max(reference), {name: max(into) for name, into in rates.items()}


def thread_gflops(n: int, threads: tuple[int, int], rounds: int = 3, pause: Callable[[float], None] = time.sleep,
                  pause_s: float = ROUND_PAUSE_S) -> tuple[float, float]:
    """GFLOP/s of an n x n float32 matmul at each of two thread counts (as configured, as advised), the two
    measured in turn, `rounds` times `pause_s` apart (`ROUND_PAUSE_S`); each count's fastest. Rounds back to back,
    each count's median, read two threads at the one-thread rate in 2 of 8 runs of the doctor's tests (97 and 107
    GFLOP/s at 1 and 2 threads on a Zen 4 core pair, 2026-11-26, where the pair reads 100 and 190). A repeat
    multiplies about 0.2 GFLOP, so that a large n stays a fraction of a second."""
    inner = max(1, round(0.2e9 / (2 * n**3)))
    rates: tuple[list[float], list[float]] = ([], [])
    for _ in _rounds_apart(rounds, pause, pause_s):
        for count, into in zip(threads, rates):
            with intra_op_threads(count):
                into.append(cpu_matmul_gflops(n=n, repeats=3, inner=inner))
    return max(rates[0]), max(rates[1])
