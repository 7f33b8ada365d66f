"""The demo's short timed start: how long a seed epoch takes here, with torch's threads and with the threads the
machine's load leaves free, and so how many epochs make a demo of about a minute anywhere.

The seed's 20,000 epochs take 9 s a variant on a quiet 2-core machine and 30 min on one where two other jobs hold the
cores (a step of 96 ms with 2 threads, 1.1 ms with 1: BENCHMARKS.md, "The demo"). The start times a few hundred
milliseconds of the seed's loop, reads the other processes' load over it, and sizes the run from what it measured.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import psutil
import torch

from trainspeed.demo.result import Start
from trainspeed.demo.variants import make_loop
from trainspeed.load.marks import mark, others_cores
from trainspeed.threads import intra_op_threads
from trainspeed.workloads.iris import IrisSplit, make_iris_mlp

TIMED_BUDGET_S = 24.0
"""What the timed runs of every variant together should take: the demo's minute is this, the doctor's section and
the imports (beside busy processes the runs took up to twice what the start said: BENCHMARKS.md, "A minute
anywhere")."""
RUN_COST = {"fit": 0.25}
"""A variant's epoch against the seed loop's, where it differs (trainspeed.fit replays the step: 4.4x faster)."""
START_S = 0.6
"""How long each thread count's timed start runs, at least START_EPOCHS epochs (and longer than the load counters' 0.5 s
window, `load.marks.LOAD_WINDOW_S`)."""
START_EPOCHS = 5
MIN_EPOCHS = 200
"""Below this the chunks hold too few epochs to time, and `record_every_200` records nothing."""


def free_threads(cores: int, others: float | None, threads: int) -> int:
    """The intra-op threads the others' load leaves a core each: the cores less the busy ones (rounded), at least 1."""
    if others is None:
        return threads
    return max(1, min(threads, math.floor(cores - others + 0.5)))


def _time_start(device: torch.device, data: IrisSplit, now: Callable[[], float]) -> float:
    """Seconds per epoch of the seed loop, timed until START_S have passed."""
    model = make_iris_mlp(seed=2).to(device)
    loop = make_loop("seed", model, data.x_train, data.y_train, 1 << 30)
    loop.run(0, 2)  # the first calls pay one-off costs
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    done, t0 = 0, now()
    while True:
        loop.run(done, done + START_EPOCHS)
        done += START_EPOCHS
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elapsed = now() - t0
        if elapsed >= START_S or done >= 100_000:
            return elapsed / done


def run_weight(variants: Sequence[str], devices: int) -> float:
    """The timed runs in seed-loop epochs per epoch: each variant's cost (RUN_COST, else the seed's), per device."""
    return sum(RUN_COST.get(v, 1.0) for v in variants) * devices


def epochs_for(us_per_epoch: float, runs: float, most: int) -> int:
    """Epochs per variant so that every variant's timed run together (`runs` seed loops' worth, `run_weight`) take
    about TIMED_BUDGET_S: a round figure (hundreds, thousands), at least MIN_EPOCHS, at most `most` (the seed's)."""
    raw = TIMED_BUDGET_S / max(runs, 1.0) / (us_per_epoch * 1e-6)
    step = 1000 if raw >= 2000 else 100
    return max(MIN_EPOCHS, min(most, int(raw // step) * step))


def measure_start(device_name: str, data: IrisSplit, runs: float, most: int,
                  now: Callable[[], float] = time.perf_counter) -> Start:
    """Time the seed's loop briefly on `device_name` (on the CPU, also with the threads the load leaves) and size the
    demo from it."""
    device = torch.device(device_name)
    threads = torch.get_num_threads()
    cores = psutil.cpu_count() or threads
    before = mark()
    per = {threads: _time_start(device, data, now)}
    others = others_cores(before, mark()) if device.type == "cpu" else None
    if device.type == "cpu":
        free = free_threads(cores, others, threads)
        if free != threads:
            with intra_op_threads(free):
                per[free] = _time_start(device, data, now)
    return Start(device.type, epochs_for(per[threads] * 1e6, runs, most), {k: v * 1e6 for k, v in per.items()},
                 threads, others, cores)
