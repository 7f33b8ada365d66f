"""From what a watched run recorded to its figures: the steps' phase shares and medians (`step_figures`), the
sampled sites, utilisation and the process's facts. Plain functions of what they read; the watcher joins their
figures and the trackers' parts into a `WatchResult`.
"""

from __future__ import annotations

import resource
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import psutil
import torch

from trainspeed.stats import median, quantile
from trainspeed.watch.phases import CALL_PHASES, EDGE_PHASES, PHASES
from trainspeed.watch.result import (
    DataSite,
    FrameworkSite,
    GpuUtil,
    Machine,
    OtherSite,
    PhaseStat,
    Process,
    Sites,
    StepRecord,
    Steps,
)
from trainspeed.watch.sampler import Sampler, machinery_of, source_of
from trainspeed.watch.sawtooth import detect_sawtooth
from trainspeed.watch.steps import StepTracker
from trainspeed.watch.trace import Trace
from trainspeed.watch.wait_bounds import phase_wait


def phase_shares(records: list[StepRecord], sums: tuple[dict[str, float], float] | None = None,
                 split: dict[str, float] | None = None) -> tuple[dict[str, float], list[StepRecord]]:
    """Each phase's share of the wall time, and the detailed records.

    Edge phases (data, h2d, sync, checkpoint, comm) are timed on every step: their shares come from
    all records, or, for the phases in `sums` ((seconds per phase, wall seconds) summed over every
    measured step, as PhaseClock.summed() gives them), from those sums. What is left is split
    among forward, backward, optimizer and other in the proportions the detailed steps measured:
    `split` (seconds per phase summed over every detailed step, PhaseClock.call_split()), else the
    detailed records. Shares sum to 1.
    """
    detailed = [r for r in records if r.detailed] or list(records)
    wall = sum(r.wall_s for r in records)
    shares = dict.fromkeys(PHASES, 0.0)
    if wall <= 0:
        return shares, detailed
    for p in EDGE_PHASES:
        shares[p] = sum(r.phases[p] for r in records) / wall
    if sums is not None and sums[1] > 0:
        seconds, summed_wall = sums
        for p, s in seconds.items():
            shares[p] = s / summed_wall
    rest = max(0.0, 1.0 - sum(shares[p] for p in EDGE_PHASES))
    if split is None:
        split = {p: sum(r.phases[p] for r in detailed) for p in CALL_PHASES}
    total = sum(split.values())
    for p in CALL_PHASES:
        shares[p] = rest * split[p] / total if total > 0 else (rest if p == "other" else 0.0)
    return shares, detailed


PACED = 1.1
"""The GPU sets the pace where its steps add up to this many times the host's (`gpu_paced`)."""


def gpu_paced(records: list[StepRecord]) -> list[StepRecord] | None:
    """Where the host ran ahead of the GPU, the records with the GPU's step times; else None.

    CUDA runs behind the host: a launch returns at once until the device's queue is full (about a thousand
    kernels). After a synchronisation (the profiler window's end, a checkpoint, the run's start) a GPU-bound loop's
    host steps are its launches alone, for as many steps as the queue holds: a short run's host median is then a
    fraction of its real step (the wide MLP on an H200, 60 steps: 29 ms against the GPU's 70 ms, 2026-11-28). Where
    the detailed steps' device spans (`StepRecord.device_span_s`) add up to PACED times their host walls or more,
    each record's wall becomes the longer of the two. (Sums, not a median of ratios: in that run about half the
    steps had run ahead and half had waited for room in the queue.)"""
    spanned = [r for r in records if r.device_span_s is not None]
    if not spanned or sum(r.device_span_s or 0.0 for r in spanned) < PACED * sum(r.wall_s for r in spanned):
        return None
    return [replace(r, wall_s=r.device_span_s) if r.device_span_s is not None and r.device_span_s > r.wall_s else r
            for r in records]


def _device_split(steps: StepTracker, detailed: list[StepRecord]) -> dict[str, float]:
    """A GPU-paced step's forward, backward and optimizer as the device ran them (median spans), and its host's
    other time: the host's own split holds where its launches waited for room in the queue, not the work."""
    split = {p: median(steps.device_ms[p].items) or 0.0 if p in steps.device_ms else 0.0 for p in CALL_PHASES}
    split["other"] = (median(r.phases["other"] for r in detailed) or 0.0) * 1e3
    return split


def _waits_ms(detailed: list[StepRecord], shares: dict[str, float],
              step_ms: float | None) -> dict[str, tuple[float, float, float]] | None:
    """Each phase's (wait for a core per step, the part of its time it lost to waiting, that part in the median
    step): the part from its detailed steps' bounds (`wait_bounds`: the threads' waits summed, and each reading's
    longest), applied to the phase's share of the mean step (the detailed steps are a sample, and a slice lost now
    and then falls on few of them); None where no wait was read."""
    waited = [r for r in detailed if r.waits is not None]
    if not waited or not step_ms:
        return None
    out = {}
    for p in PHASES:
        found = phase_wait([(r.phases[p], r.waits[p], (r.longest_waits or r.waits)[p],
                             r.joint_waits[p] if r.joint_waits is not None else None) for r in waited if r.waits])
        part, typical = (found.part, found.typical) if found is not None else (0.0, 0.0)
        out[p] = (part * shares[p] * step_ms, part, typical)
    return out


@dataclass(frozen=True)
class StepFigures:
    """The steps tracker's figures: its part of the result, the phase table, and what the session joins in."""

    steps: Steps
    phases: dict[str, PhaseStat]
    cell_calls_per_step: float | None
    """Calls of a recurrent cell per step, the median over the detailed steps (the model tracker's `cell_loop`)."""
    summed: tuple[dict[str, float], float] | None = field(repr=False)
    """The clock's sums over every measured step (None where the statistics came from the warm-up)."""
    notes: list[str] = field(default_factory=list)


def step_figures(steps: StepTracker) -> StepFigures:
    """The steps' figures so far (partial if the run stopped early). Data, h2d, sync and checkpoint from the clock's
    sums over every measured step, the split of the rest from its sums over every detailed one; step times exact
    up to RESERVOIR_SIZE measured steps, beyond that from the uniform sample; forward's, backward's, optimizer's
    and other's median host times from the sample of detailed steps."""
    clock = steps.clock
    records = steps.measured.items
    n = steps.measured.seen + steps.quiet_so_far()  # asked mid-run (a rank's summary): quiet steps too
    notes = []
    if not records and steps.warm.items:  # a run too short to leave its warm-up: use what there is
        records = steps.warm.items
        n = len(records)
        notes.append(f"only {steps.steps_seen} steps: warm-up steps were used for the statistics")
    whole_run = records is steps.measured.items
    summed = clock.summed() if whole_run else None
    split = clock.call_split() if whole_run else None
    host_median, timed_sums = None, summed
    if (paced := gpu_paced(records)) is not None:
        host_median = median(r.wall_s * 1e3 for r in records)
        records, timed_sums = paced, None  # the clock's sums are the host's
        split = _device_split(steps, [r for r in records if r.detailed] or records)
        notes.append(f"the GPU set the pace: the host ran ahead of it into CUDA's launch queue ({host_median:.3f} "
                     "ms a step on the host); step times are the GPU's (CUDA events at each detailed step's first and "
                     "last phase edges) where longer, and forward, backward and optimizer are split as the GPU ran them")
    shares, detailed = phase_shares(records, timed_sums, split)
    if whole_run and steps.detailed_steps is not None and steps.detailed_steps.items:
        detailed = steps.detailed_steps.items
    phases = {}
    step_ms = [r.wall_s * 1e3 for r in records]
    mean = timed_sums[1] * 1e3 / n if timed_sums is not None and n and timed_sums[1] > 0 else \
        (sum(step_ms) / len(step_ms) if paced and step_ms else None)
    waits = _waits_ms(detailed, shares, mean or median(step_ms))
    for p in PHASES:
        dev = median(steps.device_ms[p].items) if p in steps.device_ms and steps.device_ms[p].items else None
        timed = records if p in EDGE_PHASES else detailed
        host = median(r.phases[p] for r in timed) if timed else None
        wait, part, typical = waits[p] if waits is not None else (None, None, None)
        phases[p] = PhaseStat(host_ms=(host or 0.0) * 1e3, device_ms=dev, share=shares[p], wait_ms=wait,
                              wait_share=part, median_wait_share=typical)
    samples = {p: [r.phases[p] * 1e3 for r in (records if p in EDGE_PHASES else detailed)] for p in PHASES}
    calls = [r.model_calls for r in detailed if r.model_calls is not None]
    steps_part = Steps(
        seen=steps.steps_seen, measured=n,
        median_ms=median(step_ms), p90_ms=quantile(step_ms, 0.9),
        mean_ms=mean, host_median_ms=host_median, loop_s=steps.loop_seconds(median(step_ms)),
        syncs_per_step=(sum(r.syncs for r in records) / len(records)) if records else 0.0,
        host_reads_per_step=(sum(r.host_reads for r in records) / len(records)) if records else 0.0,
        h2d_bytes_per_step=(sum(r.h2d_bytes for r in records) / len(records)) if records else 0.0,
        samples=sorted(steps.plot_steps, key=lambda r: r.index), times_ms=step_ms, phase_samples_ms=samples,
        micro_batches_per_step=median([r.micro_batches for r in detailed if r.micro_batches is not None]),
        model_calls_per_step=median([c[0] for c in calls]),
        model_calls_chained=median([c[1] for c in calls]),
        model_calls_after_read=median([c[2] for c in calls]),
        optimizer_steps_per_step=median([r.optimizer_steps for r in detailed if r.optimizer_steps is not None]),
        anomaly_ms_per_step=(sum(r.anomaly_s for r in detailed) * 1e3 / len(detailed)) if detailed else None,
        recompute_ms_per_step=(sum(r.recompute_s for r in detailed) * 1e3 / len(detailed)) if detailed else None)
    return StepFigures(steps_part, phases, cell_calls_per_step=median([c[3] for c in calls]), summed=summed,
                       notes=notes)


def _inside(by_library: Mapping[tuple[str, str], int], samples: Mapping[str, int]) -> dict[str, str]:
    """Each site -> the library most of its samples ran in, where at least half of them did."""
    most: dict[str, tuple[str, int]] = {}
    for (site, library), count in by_library.items():
        if count > most.get(site, ("", 0))[1]:
            most[site] = (library, count)
    return {site: library for site, (library, count) in most.items() if 2 * count >= samples[site]}


def other_sites(s: Sampler | None) -> list[OtherSite]:
    if s is None or not s.other_total:
        return []
    inside = _inside(s.other_inside, s.other_samples)
    return [OtherSite(site, source_of(site), count, count / s.other_total, inside=inside.get(site))
            for site, count in s.other_samples.most_common(10)]


def data_sites(s: Sampler | None) -> list[DataSite]:
    return _sites(s.data_samples, s.data_inside) if s is not None else []


def worker_sites(s: Sampler | None) -> list[DataSite]:
    """What the DataLoader's worker processes ran while they made batches (their own stack samples), by site; the
    shares are of those samples."""
    return _sites(s.worker_samples, s.worker_inside) if s is not None else []


def _sites(samples: Counter[str], by_library: Counter[tuple[str, str]]) -> list[DataSite]:
    """The top data sites of a tally of stack samples, each with its share of them (none where it is empty)."""
    total = sum(samples.values())
    if not total:
        return []
    inside = _inside(by_library, samples)
    return [DataSite(site, source_of(site), count, count / total,  # (a function's site has no line: "")
                     inside=inside.get(site), machinery=machinery_of(site))
            for site, count in samples.most_common(8)]


def framework_sites(s: Sampler | None) -> list[FrameworkSite]:
    if s is None or not s.other_total:
        return []
    return [FrameworkSite(function, count, count / s.other_total) for function, count in s.other_framework.most_common(5)]


def loop_sites(s: Sampler | None) -> list[OtherSite]:
    if s is None or not s.loop_total:
        return []
    return [OtherSite(site, source_of(site), count, count / s.loop_total)
            for site, count in s.other_loop.most_common(5)]


def gpu_util(s: Sampler | None, device: str, step_ms: list[float]) -> GpuUtil:
    if device != "cuda":
        return GpuUtil(False, None, 0, False, "the run did not use a CUDA device")
    if s is None or s.nvml is None:
        return GpuUtil(False, None, 0, False, (s.nvml_why if s else None) or "NVML unavailable")
    timeline = list(s.util)
    period = (median(step_ms) or 0.0) / 1e3
    saw, why = detect_sawtooth([u for _, u in timeline], [t for t, _ in timeline], period)
    mean = s.util_sum / s.util_n if s.util_n else None
    return GpuUtil(True, mean, s.util_n, saw, why, timeline[-2000:])


def sites(s: Sampler | None) -> Sites:
    """The sampler's part: the sites of its stack samples."""
    return Sites(other_sites(s), loop_sites(s), framework_sites(s), data_sites(s), worker_sites(s))


def process(s: Sampler | None, device: str, index: int) -> Process:
    """The process's threads and CPU (the sampler's readings) and the memory it held on `device`."""
    return Process(torch_threads=torch.get_num_threads(),
                   cpu_percent=(sum(s.cpu_percent) / len(s.cpu_percent)) if s and s.cpu_percent else None,
                   threads=max(s.threads) if s and s.threads else None,
                   peak_memory_bytes=peak_memory(device, index), memory_capacity_bytes=capacity(device, index))


def machine(part: Machine, s: Sampler | None) -> Machine:
    """The machine tracker's part with the sampler's: whether the run's threads took turns on one CPU."""
    return replace(part, threads_one_cpu_share=s.cores.share() if s is not None else None)


def peak_memory(device: str, index: int) -> int | None:
    if device == "cuda" and torch.cuda.is_initialized():
        return int(torch.cuda.max_memory_allocated(index))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss * (1 if sys.platform == "darwin" else 1024))  # Linux reports KiB


def capacity(device: str, index: int) -> int | None:
    if device == "cuda" and torch.cuda.is_initialized():
        return int(torch.cuda.get_device_properties(index).total_memory)
    return int(psutil.virtual_memory().total)


def trace_of(steps: StepTracker, device: str) -> Trace | None:
    """The kept steps' timelines (trace=True), with the profiler window's ops where it was torch.profiler."""
    if steps.traced is None:
        return None
    window = steps.window
    notes = []
    if window.trace_ops is None and window.steps:
        notes.append("no op track: the profiler window ran as dispatch modes on the CPU (torch.profiler runs it on "
                     "CUDA and after torch.compile), which count ops but do not place them in time")
    return Trace(sorted(steps.traced.values(), key=lambda s: s.index), list(window.trace_ops or []), device, notes)
