"""From what a watched run recorded to its measurements (`WatchResult`): phase shares, medians,
sites, utilisation and the process's facts.
"""

from __future__ import annotations

import dataclasses
import resource
import sys
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

import psutil
import torch

from trainspeed.watch import frameworks, machine_load
from trainspeed.watch.phases import CALL_PHASES, EDGE_PHASES, PHASES
from trainspeed.watch.result import (
    DataSite,
    FrameworkSite,
    GpuUtil,
    OtherSite,
    PhaseStat,
    StepRecord,
    SyncSite,
    WatchResult,
)
from trainspeed.watch.sampler import machinery_of, source_of
from trainspeed.watch.sawtooth import detect_sawtooth
from trainspeed.watch.stats import median, quantile
from trainspeed.watch.trace import Trace

if TYPE_CHECKING:
    from trainspeed.watch.session import Watcher


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


def measurements(self: Watcher, gathering: bool = False) -> WatchResult:
    """The measurements so far (partial if the run stopped early)."""
    records = self.measured.items
    n = self.measured.seen + self._quiet_so_far()  # asked mid-run (a rank's summary): quiet steps too
    notes = self.notes + self.window.notes
    too_old = frameworks.unsupported_note(self.framework) if self.framework is not None else None
    if too_old is not None:
        notes = notes + [too_old]
    if not records and self.warm.items:  # a run too short to leave its warm-up: use what there is
        records = self.warm.items
        n = len(records)
        notes.append(f"only {self.steps_seen} steps: warm-up steps were used for the statistics")
    # data, h2d, sync and checkpoint from the clock's sums over every measured step, the split of
    # the rest from its sums over every detailed one; step times exact up to RESERVOIR_SIZE measured
    # steps, beyond that from the uniform sample; forward's, backward's, optimizer's and other's
    # median host times from the sample of detailed steps
    sync_sites, host_read_sites = self._read_sites()
    whole_run = records is self.measured.items
    summed = self.clock.summed() if whole_run else None
    shares, detailed = phase_shares(records, summed, self.clock.call_split() if whole_run else None)
    start_share = self.loader_start_s / summed[1] if summed is not None and summed[1] > 0 else None
    if whole_run and self.detailed_steps is not None and self.detailed_steps.items:
        detailed = self.detailed_steps.items
    phases = {}
    for p in PHASES:
        dev = median(self.device_ms[p].items) if p in self.device_ms and self.device_ms[p].items else None
        timed = records if p in EDGE_PHASES else detailed
        host = median(r.phases[p] for r in timed) if timed else None
        phases[p] = PhaseStat(host_ms=(host or 0.0) * 1e3, device_ms=dev, share=shares[p])
    step_ms = [r.wall_s * 1e3 for r in records]
    samples = {p: [r.phases[p] * 1e3 for r in (records if p in EDGE_PHASES else detailed)] for p in PHASES}
    result = WatchResult(
        steps_seen=self.steps_seen, steps_measured=n,
        median_ms=median(step_ms), p90_ms=quantile(step_ms, 0.9),
        mean_ms=summed[1] * 1e3 / n if summed is not None and n and summed[1] > 0 else None,
        evaluation=self._evaluation(summed, n),
        phases=phases,
        syncs_per_step=(sum(r.syncs for r in records) / len(records)) if records else 0.0,
        host_reads_per_step=(sum(r.host_reads for r in records) / len(records)) if records else 0.0,
        saves=self.saves, save_calls=self.save_calls,
        saves_every_steps=(self._save_steps[1] - self._save_steps[0]) / (self.saves - 1) if self.saves > 1 else None,
        h2d_bytes_per_step=(sum(r.h2d_bytes for r in records) / len(records)) if records else 0.0,
        ops_per_step=self.window.ops_per_step, kernels_per_step=self.window.kernels_per_step,
        flops_per_step=self.window.flops_per_step,
        other_ops_per_step=self.window.outside_ops_per_step, edge_ops_per_step=self.window.edge_ops_per_step,
        compiled=self.window.compiled, autocast=self.autocast,
        other_op_ms_per_step=self.window.outside_op_ms_per_step, op_times=self.window.op_times,
        op_ms_per_step=self.window.op_ms_per_step,
        loader_starts=self.loader_starts, loader_start_share=start_share,
        loader_start_ms=self.loader_start_s * 1e3 / self.loader_starts if self.loader_starts else None,
        sync_sites=sync_sites, host_read_sites=host_read_sites, other_sites=self._other_sites(),
        loop_sites=self._loop_sites(),
        gpu_util=self._gpu_util(step_ms),
        device=self.device, batch_size=self.batch_size,
        framework=dataclasses.replace(self.framework, made_at=dict(self.made_at.sites)) if self.framework else None,
        framework_sites=_framework_sites(self), data_sites=_data_sites(self), worker_sites=_worker_sites(self),
        loaders=[dataclasses.replace(info, batches=self.loader_batches[key]) for key, info in self.loaders.items()],
        torch_threads=torch.get_num_threads(), process_cpu_percent=self._cpu(),
        others_cpu_cores=machine_load.others_cores(self.load_from, self.load_to),
        loader_workers=machine_load.worker_cpu(self.load_from, self.load_to),
        page_faults_per_step=machine_load.page_faults(self.load_from, self.load_to),
        page_faults_early_per_step=machine_load.early_page_faults(self.early_faults),
        compiles=machine_load.compiled(self.load_from, self.load_to),
        peak_memory_bytes=self._peak_memory(), memory_capacity_bytes=self._capacity(),
        h2d_bytes_by_kind=dict(self.h2d_kinds), process_threads=self._threads(),
        step_samples=sorted(self.plot_steps, key=lambda r: r.index),
        step_times_ms=step_ms, phase_samples_ms=samples, trace=self._trace(), notes=notes, gpu_busy_ms_per_step=self.window.gpu_busy_ms_per_step,
        micro_batches_per_step=median([r.micro_batches for r in detailed if r.micro_batches is not None]),
        model_calls_per_step=median([r.model_calls[0] for r in detailed if r.model_calls is not None]),
        model_calls_chained=median([r.model_calls[1] for r in detailed if r.model_calls is not None]),
        model_calls_after_read=median([r.model_calls[2] for r in detailed if r.model_calls is not None]),
        optimizer_steps_per_step=median([r.optimizer_steps for r in detailed if r.optimizer_steps is not None]),
        optimizer_changes=self.primary_changes, optimizers_built=self.optimizers_built,
        optimizer_build_ms=self.optimizer_build_s * 1e3 / self.optimizers_built if self.optimizers_built else None,
        optimizer=self._optimizer_info(),
        anomaly_ms_per_step=(sum(r.anomaly_s for r in detailed) * 1e3 / len(detailed)) if detailed else None,
        recompute_ms_per_step=(sum(r.recompute_s for r in detailed) * 1e3 / len(detailed)) if detailed else None,
    )
    if gathering:
        return result
    return dataclasses.replace(result, distributed=self._dist_run(result))


def _read_sites(self: Watcher) -> tuple[list[SyncSite], list[SyncSite]]:
    """The places that read device tensors (the syncs) and those that read CPU tensors, each the most time first."""
    merged: dict[tuple[str, str, bool], list[float]] = {}
    for where, op, count, seconds, host in self.syncs.sites():  # several instructions of one line merge
        entry = merged.setdefault((where, op, host), [0, 0.0])
        entry[0] += count
        entry[1] += seconds
    sites = sorted(((host, SyncSite(where, op, int(c), t * 1e3, source_of(where)))
                    for (where, op, host), (c, t) in merged.items()), key=lambda hs: hs[1].total_ms, reverse=True)
    return [s for host, s in sites if not host], [s for host, s in sites if host]


def _inside(by_library: Mapping[tuple[str, str], int], samples: Mapping[str, int]) -> dict[str, str]:
    """Each site -> the library most of its samples ran in, where at least half of them did."""
    most: dict[str, tuple[str, int]] = {}
    for (site, library), count in by_library.items():
        if count > most.get(site, ("", 0))[1]:
            most[site] = (library, count)
    return {site: library for site, (library, count) in most.items() if 2 * count >= samples[site]}


def _other_sites(self: Watcher) -> list[OtherSite]:
    s = self.sampler
    if s is None or not s.other_total:
        return []
    inside = _inside(s.other_inside, s.other_samples)
    return [OtherSite(site, source_of(site), count, count / s.other_total, inside=inside.get(site))
            for site, count in s.other_samples.most_common(10)]


def _data_sites(self: Watcher) -> list[DataSite]:
    s = self.sampler
    return _sites(s.data_samples, s.data_inside) if s is not None else []


def _worker_sites(self: Watcher) -> list[DataSite]:
    """What the DataLoader's worker processes ran while they made batches (their own stack samples), by site; the
    shares are of those samples."""
    s = self.sampler
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


def _framework_sites(self: Watcher) -> list[FrameworkSite]:
    s = self.sampler
    if s is None or not s.other_total:
        return []
    return [FrameworkSite(function, count, count / s.other_total) for function, count in s.other_framework.most_common(5)]


def _loop_sites(self: Watcher) -> list[OtherSite]:
    s = self.sampler
    if s is None or not s.loop_total:
        return []
    return [OtherSite(site, source_of(site), count, count / s.loop_total)
            for site, count in s.other_loop.most_common(5)]


def _gpu_util(self: Watcher, step_ms: list[float]) -> GpuUtil:
    s = self.sampler
    if self.device != "cuda":
        return GpuUtil(False, None, 0, False, "the run did not use a CUDA device")
    if s is None or s.nvml is None:
        return GpuUtil(False, None, 0, False, (s.nvml_why if s else None) or "NVML unavailable")
    timeline = list(s.util)
    period = (median(step_ms) or 0.0) / 1e3
    saw, why = detect_sawtooth([u for _, u in timeline], [t for t, _ in timeline], period)
    mean = s.util_sum / s.util_n if s.util_n else None
    return GpuUtil(True, mean, s.util_n, saw, why, timeline[-2000:])


def _cpu(self: Watcher) -> float | None:
    s = self.sampler
    return (sum(s.cpu_percent) / len(s.cpu_percent)) if s and s.cpu_percent else None


def _threads(self: Watcher) -> int | None:
    s = self.sampler
    return max(s.threads) if s and s.threads else None


def _peak_memory(self: Watcher) -> int | None:
    if self.device == "cuda" and torch.cuda.is_initialized():
        return int(torch.cuda.max_memory_allocated(self.device_index))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss * (1 if sys.platform == "darwin" else 1024))  # Linux reports KiB


def _capacity(self: Watcher) -> int | None:
    if self.device == "cuda" and torch.cuda.is_initialized():
        return int(torch.cuda.get_device_properties(self.device_index).total_memory)
    return int(psutil.virtual_memory().total)


def _trace(self: Watcher) -> Trace | None:
    """The kept steps' timelines (trace=True), with the profiler window's ops where it was torch.profiler."""
    if self.traced is None:
        return None
    notes = []
    if self.window.trace_ops is None and self.window.steps:
        notes.append("no op track: the profiler window ran as dispatch modes on the CPU (torch.profiler runs it on "
                     "CUDA and after torch.compile), which count ops but do not place them in time")
    return Trace(sorted(self.traced.values(), key=lambda s: s.index), list(self.window.trace_ops or []),
                 self.device, notes)
