"""Memory verdicts: a peak close to the device's capacity (`memory_pressure`), and memory saved at the price of
recomputing forwards inside backward (`recompute_heavy`)."""

from __future__ import annotations

from trainspeed.diagnose.rules.common import Context, _low_precision, _step_speedup
from trainspeed.watch.result import Verdict, WatchResult

MEMORY_SHARE = 0.90
RECOMPUTE_SHARE = 0.10
"""Activation checkpointing's recompute for a tenth of the step or more. A 6-block MLP (256 wide, batch 128) with
each block under `torch.utils.checkpoint.checkpoint(use_reentrant=False)` spent 4.4 ms of a 32.5 ms CPU step
recomputing the blocks (Zen 4, 2026-11-26); without checkpointing the script ran 1.35x as fast (3 alternated runs),
where the recompute alone predicts 1.16x: checkpointing's own work in backward (unpacking every saved tensor
through its hooks, the recomputed segments' graph) is not in the module calls."""


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


def recompute_heavy(r: WatchResult, c: Context) -> Verdict | None:
    ms, step = r.recompute_ms_per_step, r.median_ms
    if not ms or not step or ms < RECOMPUTE_SHARE * step:
        return None
    where = "GPU memory" if r.device == "cuda" else "RAM"
    peak = (f"; the run's peak memory was {r.peak_memory_bytes / 2**30:.2f} GiB of {r.memory_capacity_bytes / 2**30:.1f}"
            f" GiB {where} ({r.peak_memory_bytes / r.memory_capacity_bytes:.0%})"
            if r.peak_memory_bytes and r.memory_capacity_bytes else "")
    evidence = (f"activation checkpointing recomputes forwards inside backward: module calls there took {ms:.2f} ms "
                f"of the {step:.2f} ms step ({ms / step:.0%}; part of the backward phase){peak} (predicted speed-up: the "
                "step without those calls, a floor: checkpointing's own work in backward is not counted)")
    action = ("where memory allows, checkpoint fewer segments or none: call the segment directly instead of "
              "torch.utils.checkpoint.checkpoint(...) (a Hugging Face model: gradient_checkpointing=False, or "
              "model.gradient_checkpointing_disable()); it keeps each segment's activations for backward, so the "
              "peak grows; where that does not fit, gradient accumulation over smaller batches")
    return Verdict("recompute_heavy", evidence, action, _step_speedup(r, step, step - ms))
