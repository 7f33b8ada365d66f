"""Recorded measurements shaped like the watcher's, for the rule families' tests."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from trainspeed.diagnose.report import DoctorReport
from trainspeed.diagnose.rules import Context, diagnose
from trainspeed.load.result import Load, PhaseLoad
from trainspeed.report.doctor_text import doctor_view
from trainspeed.watch.phases import PHASES
from trainspeed.watch.result import (
    GpuUtil,
    LoaderInfo,
    Loaders,
    ModelFacts,
    PhaseStat,
    Process,
    Steps,
    WatchResult,
    Window,
)
from trainspeed.watch.sites import Reads, SyncSite

CTX = Context(dispatch_us=2.0, matmul_gflops=100.0, physical_cores=8, logical_threads=16)


def recorded(step_ms: float, host: dict[str, float], device: dict[str, float] | None = None, *, dev: str = "cpu",
             ops: float | None = 40, flops: float | None = None, syncs: float = 0.0, batch: int | None = 64,
             loaders: list[LoaderInfo] | None = None, util: GpuUtil | None = None, threads: int = 8,
             peak: int | None = None, capacity: int | None = None, h2d: float = 0.0,
             busy: float | None = None, kernels: float | None = None,
             shares: dict[str, float] | None = None) -> WatchResult:
    """A WatchResult shaped like one the watcher records; `host` phases in ms (medians), the rest is
    `other`; `device` the phases' event spans, `busy` the GPU's own work per step (the profiler
    window's); `shares` of the run's time where they differ from median over step (bursts)."""
    host = {**host, "other": step_ms - sum(host.values())}
    share = {p: host.get(p, 0.0) / step_ms for p in PHASES}
    if shares:
        share.update(shares)
        share["other"] = 1 - sum(v for p, v in share.items() if p != "other")
    phases = {p: PhaseStat(host.get(p, 0.0), (device or {}).get(p), share[p]) for p in PHASES}
    return WatchResult(
        steps=Steps(seen=100, measured=94, median_ms=step_ms, p90_ms=step_ms * 1.1, syncs_per_step=syncs,
                    h2d_bytes_per_step=h2d),
        phases=phases,
        model=ModelFacts(device=dev, batch_size=batch, h2d_bytes_by_kind={"pageable": int(h2d * 94)} if h2d else {}),
        process=Process(torch_threads=threads, peak_memory_bytes=peak, memory_capacity_bytes=capacity),
        gpu_util=util or GpuUtil(False, None, 0, False),
        window=Window(ops_per_step=ops, kernels_per_step=(kernels or ops) if dev == "cuda" else None,
                      flops_per_step=flops, gpu_busy_ms_per_step=busy),
        reads=Reads(sync_sites=[SyncSite("train.py:42", "item", 94, syncs * step_ms)] if syncs else []),
        loaders=Loaders(each=loaders or []),
    )


def with_load(r: WatchResult, waits: dict[str, float] | None = None, **figures: float | None) -> WatchResult:
    """`r` with these figures of the machine's load (`Load`: `others_cpu_cores=1.0`, `threads_one_cpu_share=...`), and
    with `waits` (phase -> milliseconds a step it waited for a core), each phase's part of its share of the mean step
    (at most all of it), the median step's the same."""
    load = dataclasses.replace(r.load or Load(), **figures)
    if waits is not None:
        step = r.steps.mean_ms or r.steps.median_ms or 0.0

        def part(p: str) -> float:
            share = r.phases[p].share
            return min(1.0, waits.get(p, 0.0) / (share * step)) if share and step else 0.0

        load = dataclasses.replace(load, phases={p: PhaseLoad(waits.get(p, 0.0), part(p), part(p)) for p in r.phases})
    return dataclasses.replace(r, load=load)


def rendered(report: DoctorReport) -> str:
    """The terminal summary of a report as text, wide enough that no line wraps."""
    console = Console(width=200, record=True)
    console.print(doctor_view(report))
    return console.export_text()


def ids(r: WatchResult, ctx: Context = CTX) -> list[str]:
    return [v.id for v in diagnose(r, ctx)]


def adamw_run(fused: bool | None = None, opt_ms: float = 11.95) -> WatchResult:
    """/tmp's unseen script (2026-11-23, CPU): 40 small Linear+LayerNorm blocks under AdamW(foreach=False),
    162 parameter tensors updated one at a time, the optimizer half of a 23.9 ms step."""
    from trainspeed.watch.result import OptimizerInfo

    r = recorded(23.87, {"forward": 4.6, "backward": 5.6, "optimizer": opt_ms}, ops=2445, flops=1.56e7, batch=64,
                 threads=2)
    return dataclasses.replace(r, optimizers=dataclasses.replace(r.optimizers,
                                                                 info=OptimizerInfo("AdamW", 162, 44932, False, fused)))
