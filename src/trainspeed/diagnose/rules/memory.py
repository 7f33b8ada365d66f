"""Memory verdict: a peak close to the device's capacity (`memory_pressure`)."""

from __future__ import annotations

from trainspeed.diagnose.rules.common import Context, _low_precision
from trainspeed.watch.result import Verdict, WatchResult

MEMORY_SHARE = 0.90


def memory_pressure(r: WatchResult, c: Context) -> Verdict | None:
    if not r.peak_memory_bytes or not r.memory_capacity_bytes:
        return None
    share = r.peak_memory_bytes / r.memory_capacity_bytes
    if share < MEMORY_SHARE:
        return None
    where = "GPU memory" if r.device == "cuda" else "RAM"
    evidence = (f"peak {r.peak_memory_bytes / 2**30:.1f} GiB of {r.memory_capacity_bytes / 2**30:.1f} GiB {where} "
                f"({share:.0%}): the caching allocator has no room left to avoid fragmentation or retries")
    fit = f"the largest batch that fits with a 10% margin is {c.largest_batch}" if c.largest_batch else \
        "`trainspeed memory` gives the largest batch that fits"
    autocast = "" if _low_precision(r) else "bf16 autocast, "  # not where the run computes in half width already
    action = f"{fit}; or {autocast}activation checkpointing, or gradient accumulation over smaller batches"
    return Verdict("memory_pressure", evidence, action, None)
