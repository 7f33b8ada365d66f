"""Memory verdicts: a peak close to the device's capacity (`memory_pressure`), memory saved at the price of
recomputing forwards inside backward (`recompute_heavy`), and memory handed back to the system and taken again every
step (`page_faults`)."""

from __future__ import annotations

import mmap

from trainspeed.diagnose.rules.brief import LARGEST_BATCH, LARGEST_BATCH_FIX, of_step, part_of_step
from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.probes import Probe
from trainspeed.diagnose.rules.step_model import low_precision, step_speedup
from trainspeed.diagnose.verdict import Lever, Verdict
from trainspeed.watch.result import WatchResult

MEMORY_SHARE = 0.90
RECOMPUTE_SHARE = 0.10
"""Activation checkpointing's recompute for a tenth of the step or more. The prediction is a floor: checkpointing's own
work in backward (unpacking every saved tensor through its hooks, the recomputed segments' graph) is not in the module
calls (BENCHMARKS.md, "Where the code's constants come from")."""


def memory_pressure(r: WatchResult, c: Context) -> Verdict | None:
    if not r.process.peak_memory_bytes or not r.process.memory_capacity_bytes:
        return None
    share = r.process.peak_memory_bytes / r.process.memory_capacity_bytes
    if share < MEMORY_SHARE:
        return None
    where = "GPU memory" if r.model.device == "cuda" else "RAM"
    evidence = (f"peak {r.process.peak_memory_bytes / 2**30:.1f} GiB of {r.process.memory_capacity_bytes / 2**30:.1f} GiB {where} "
                f"({share:.0%}): the caching allocator has no room left to avoid fragmentation or retries")
    fit = f"the largest batch that fits with a 10% margin is {c.largest_batch}" if c.largest_batch else \
        LARGEST_BATCH
    autocast = "" if low_precision(r) else "bf16 autocast, "  # not where the run computes in half width already
    action = f"{fit}; or {autocast}activation checkpointing, or gradient accumulation over smaller batches"
    return Verdict("memory_pressure", evidence, action, None, title="Memory nearly full",
                   brief=f"peak {r.process.peak_memory_bytes / 2**30:.1f} of {r.process.memory_capacity_bytes / 2**30:.1f}"
                         f" GiB {where} ({share:.0%})",
                   fix=f"batch_size={c.largest_batch}" if c.largest_batch else
                   LARGEST_BATCH_FIX,
                   unpredicted="memory is a limit, not a cost: it bounds the batch")


def recompute_heavy(r: WatchResult, c: Context) -> Verdict | None:
    ms, step = r.steps.recompute_ms_per_step, r.steps.median_ms
    if not ms or not step or ms < RECOMPUTE_SHARE * step:
        return None
    where = "GPU memory" if r.model.device == "cuda" else "RAM"
    peak = (f"; the run's peak memory was {r.process.peak_memory_bytes / 2**30:.2f} GiB of {r.process.memory_capacity_bytes / 2**30:.1f}"
            f" GiB {where} ({r.process.peak_memory_bytes / r.process.memory_capacity_bytes:.0%})"
            if r.process.peak_memory_bytes and r.process.memory_capacity_bytes else "")
    evidence = (f"activation checkpointing recomputes forwards inside backward: module calls there took {ms:.2f} ms "
                f"of the {step:.2f} ms step ({ms / step:.0%}; part of the backward phase){peak} (predicted speed-up: the "
                "step without those calls, a floor: checkpointing's own work in backward is not counted)")
    action = ("where memory allows, checkpoint fewer segments or none: call the segment directly instead of "
              "torch.utils.checkpoint.checkpoint(...) (a Hugging Face model: gradient_checkpointing=False, or "
              "model.gradient_checkpointing_disable()); it keeps each segment's activations for backward, so the "
              "peak grows; where that does not fit, gradient accumulation over smaller batches")
    return Verdict("recompute_heavy", evidence, action, step_speedup(r, step, step - ms),
                   title="Activation checkpointing recomputes the forward",
                   brief=f"recomputed forwards take {of_step(ms, step)}",
                   fix="call the segment directly, not torch.utils.checkpoint.checkpoint(...), where memory allows")


MALLOC_KEEPS = Lever("malloc", {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "4294967296"},
                     "export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296",
                     same_arithmetic=True)
"""page_faults' lever: glibc's malloc keeps freed blocks up to 32 MiB in its heap (environment variables it reads as
the process starts)."""
PAGE_FAULT_SHARE = 0.10
"""Minor page faults for a tenth of the step or more (BENCHMARKS.md, "Memory the allocator hands back every step")."""
PAGE_FAULT_PROBE_BYTES = 2**20
"""A MiB of fresh pages a step or more: worth measuring what a fault costs here (`page_faults_candidate`)."""


def page_faults_candidate(r: WatchResult) -> bool:
    """Whether the run took enough fresh pages a step to be worth probing what one costs."""
    return bool(r.machine.page_faults_per_step and r.machine.page_faults_per_step * mmap.PAGESIZE >= PAGE_FAULT_PROBE_BYTES)


PROBES = (Probe("page_fault_us", page_faults_candidate, "trainspeed.probe.page_faults:for_run", judged=False),)
"""Microseconds one minor page fault takes here (`page_faults`)."""


UNWATCHED_MORE = 1.5
"""The warm-up's steps before the profiler window faulted this many times the measured steps' pages or more: the
doctor's own memory changed how often the allocator hands memory back, and the unwatched run is the one judged."""


def page_faults(r: WatchResult, c: Context) -> Verdict | None:
    watched, early, step, us = r.machine.page_faults_per_step, r.machine.page_faults_early_per_step, r.steps.median_ms, c.probed.get("page_fault_us")
    if not watched or not step or us is None:
        return None
    unwatched = early is not None and early >= UNWATCHED_MORE * watched
    faults = early if unwatched and early is not None else watched
    ms = faults * us / 1e3
    plain = step + (faults - watched) * us / 1e3  # the step as it runs unwatched, its extra faults in it
    if ms < PAGE_FAULT_SHARE * plain:
        return None
    mib = faults * mmap.PAGESIZE / 2**20
    evidence = (f"{faults:,.0f} minor page faults per step: {mib:,.0f} MiB of memory that the system hands the process "
                "afresh and zeroes, every step: the allocator gives large freed blocks back to the system and asks for "
                "them again the next step")
    action = ("keep freed memory in the process: with glibc's malloc (Linux), run with MALLOC_MMAP_THRESHOLD_=33554432 "
              "MALLOC_TRIM_THRESHOLD_=4294967296 in the environment (blocks up to 32 MiB, glibc's largest, then come "
              "from a heap it keeps), or LD_PRELOAD jemalloc or tcmalloc, which also keep larger blocks; in the "
              "script, fewer large tensors made anew each step: the optimizer's foreach=True or fused=True (fewer "
              "temporaries), nn.Embedding(sparse=True) with torch.optim.SparseAdam where a step touches few rows of a "
              "large table")
    counted = f"{faults:,.0f} page faults a step{' unwatched' if unwatched else ''} ({mib:,.0f} MiB)"
    title = "Memory handed back and taken again every step"
    if watched * us / 1e3 > step:  # the probed cost does not hold inside the step: the count said, no time, no gain
        why = (f"one fault's {us:.2f} us, probed after the run, makes the measured steps' {watched:,.0f} faults "
               f"{watched * us / 1e3:.1f} ms: more than the {step:.1f} ms step")
        return Verdict("page_faults", f"{evidence}; {why}: faults cost less inside the step", action, None,
                       MALLOC_KEEPS, title=title, brief=f"{counted} of fresh memory", fix=MALLOC_KEEPS.paste,
                       unpredicted=why)
    evidence += f"; about {ms:.1f} ms at the {us:.2f} us one fault took here (measured after the run)"
    if unwatched:
        evidence += (f"; those are the warm-up's steps, before the doctor's profiler window: the measured steps faulted "
                     f"{watched:,.0f} pages each, as the doctor's own memory changed where glibc's heap ends, so "
                     f"unwatched the step takes about {plain:.1f} ms, not the {step:.1f} ms measured (predicted "
                     "speed-up: from that step to the one without faults)")
    else:
        evidence += (f", of the {step:.1f} ms step (predicted speed-up: the step without those faults; unwatched, the "
                     "run may fault more, as the doctor's own memory changes where the allocator's heap ends)")
    return Verdict("page_faults", evidence, action, step_speedup(r, plain, plain - ms), MALLOC_KEEPS, title=title,
                   brief=f"{counted}: {part_of_step(ms, plain)}", fix=MALLOC_KEEPS.paste)
