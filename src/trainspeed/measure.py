"""Measure, for the judging: the machine constants the rules need for a watched run, probed after the run.

The doctor measures (`watch/`), then measures the machine here (the probes of `probe/` and the memory estimate, only
those the run's measurements ask for), then judges (`diagnose/`, pure). `diagnose_run` does the last two.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from collections.abc import Callable
from typing import Any

from trainspeed.diagnose.report import DoctorReport, judge
from trainspeed.diagnose.rules import (
    MEMORY_SHARE,
    Context,
    bf16_candidate,
    busiest_loader,
    busy_keep,
    loader_candidate,
    matmul_side,
    optimizer_candidate,
    rebuilt_candidate,
    slow_dtype_candidates,
    threads_candidate,
)
from trainspeed.diagnose.rules.registry import declared, script_view
from trainspeed.hardware.cpu import usable_cores
from trainspeed.hardware.gpu import GpuPeak, math_peak
from trainspeed.hardware.report import HardwareReport, detect_hardware
from trainspeed.load.view import others_busy
from trainspeed.probe.dispatch import cpu_dispatch_us, cuda_op_us
from trainspeed.probe.loader import Handover, batched_ms, handover_ms
from trainspeed.probe.matmul import cpu_matmul_gflops, dtype_ratios, settled_gflops, thread_gflops
from trainspeed.probe.optimizer import rebuild_ms, step_ms, step_reading
from trainspeed.probe.readings import ProbeRun
from trainspeed.probe.rnn import cell_call_ops, cell_loop_ms
from trainspeed.probe.spacing import Spacer
from trainspeed.probe.thread_step import loaded_step_ms, thread_step_ms
from trainspeed.threads import intra_op_threads
from trainspeed.watch.result import WatchResult
from trainspeed.watch.subject import RunSubject

_OPTIMIZER_NAMES = {"sgd": "sgd-momentum", "adam": "adam", "adamw": "adamw", "rmsprop": "rmsprop", "adagrad": "adagrad"}


def _largest_batch(subject: RunSubject | None, result: WatchResult) -> int | None:
    """The memory estimator's largest batch for the watched model (only under memory pressure)."""
    model = subject.model() if subject is not None and subject.model is not None else None
    if subject is None or model is None or subject.input_spec is None or not result.process.memory_capacity_bytes:
        return None
    from trainspeed.memory.estimate import Estimator
    from trainspeed.memory.losses import ChosenLoss
    from trainspeed.memory.maxbatch import search_max_batch

    shape, dtype = subject.input_spec
    import torch

    at = subject.batch_dim  # a time-first model's batch is its input's second dimension

    def make(b: int) -> torch.Tensor:
        size = (*shape[:at], b, *shape[at:])
        return torch.randn(size, dtype=dtype) if dtype.is_floating_point else torch.zeros(size, dtype=dtype)

    optimizer = _OPTIMIZER_NAMES.get(subject.optimizer_kind or "", "adam")
    try:
        est = Estimator(model, make, optimizer=optimizer, device=result.model.device,
                        warm_batch=result.model.batch_size or 1, loss=ChosenLoss(shape))
        first = est.estimate(result.model.batch_size or 1)
        return search_max_batch(est.peak, first, result.process.memory_capacity_bytes).max_batch
    except Exception:  # the estimate is a bonus here; the verdict stands without it
        return None


def _probed_spec(subject: RunSubject | None, result: WatchResult, candidate: Callable[[WatchResult], bool]) -> Any:
    """The run's optimizer as the probes see it (OptimizerSpec), where `candidate(result)` asks for a probe."""
    spec = subject.optimizer_spec if subject is not None else None
    return spec if spec is not None and not spec.differentiable and candidate(result) else None


def _optimizer_probe(subject: RunSubject | None,
                     result: WatchResult) -> tuple[tuple[float, float] | None, float | None]:
    """The run's optimizer stepped as configured and fused on fresh tensors of its parameters' shapes (only
    where its phase is worth it: `optimizer_candidate`): (configured ms, fused ms), and the configured step's minor
    page faults."""
    spec = _probed_spec(subject, result, optimizer_candidate)
    if spec is None:
        return None, None
    configured = step_reading(spec, fused=None)
    fused = step_ms(spec, fused=True) if configured is not None else None
    if configured is None or fused is None:
        return None, None
    return (configured[0], fused), configured[1]


def _rebuild_probe(subject: RunSubject | None, result: WatchResult) -> tuple[float, float] | None:
    """The run's optimizer built and stepped once, against a step of one kept (only where the script builds
    one every step or so: `rebuilt_candidate`)."""
    spec = _probed_spec(subject, result, rebuilt_candidate)
    return rebuild_ms(spec) if spec is not None else None


def _loader_probes(subject: RunSubject | None, result: WatchResult) -> tuple[Handover | None, float | None]:
    """The busiest loader's batches handed over by a worker and, for a TensorDataset fetched
    row by row, taken whole (only where the run waited on data: `loader_candidate`)."""
    info = busiest_loader(result)
    if subject is None or info is None or not loader_candidate(result) or not info.batch_size:
        return None, None
    index = result.loaders.each.index(info)
    item, rows = subject.loader_probes[index] if index < len(subject.loader_probes) else (None, 0)
    return handover_ms(item, info.batch_size), batched_ms(item, info.batch_size, rows) if rows else None


def _gpu_peak(hw: HardwareReport, result: WatchResult, subject: RunSubject | None) -> GpuPeak | None:
    """CUDA: the peak of the GPU the run used, in the run's math: half precision under a bfloat16 or float16
    autocast or with the model's parameters in one; else float32, on TF32 where torch's matmul allows it."""
    import torch

    if result.model.device != "cuda" or not torch.cuda.is_available():
        return None
    index = torch.cuda.current_device()
    gpu = next((g for g in hw.gpu.gpus if g.index == index), None)
    if gpu is None:
        return None
    model = subject.model() if subject is not None and subject.model is not None else None
    param = next(model.parameters(), None) if model is not None else None
    halves = ("bfloat16", "float16")
    half = result.model.autocast in halves or (param is not None and str(param.dtype).removeprefix("torch.") in halves)
    return math_peak(gpu, half, torch.backends.cuda.matmul.allow_tf32)


def _cell_probe(result: WatchResult, busy: bool) -> tuple[tuple[float, float] | None, int | None]:
    """The run's cell loop against the fused layer on its shapes, and the ops one call of its cell adds to a step
    (`probe.rnn`), where the run has one and a batch; timed on one thread's CPU time where other processes held the
    cores."""
    if result.model.cell_loop is None or not result.model.batch_size:
        return None, None
    device = "cuda" if result.model.device == "cuda" else "cpu"
    loop = result.model.cell_loop
    timed = cell_loop_ms(loop, result.model.batch_size, loop.length(), device,
                         loaded=busy)
    return timed, cell_call_ops(loop, device) if timed is not None else None


def _declared_probes(run: ProbeRun, given: dict[str, Any] | None) -> dict[str, Any]:
    """The readings of the probes the rules declare (`rules.probes`) that the run wants (`given` ones as they are)."""
    probed = dict(given or {})
    for probe in declared():
        if probe.name not in probed and probe.wanted(run.judged if probe.judged else run.result):
            module, _, function = probe.measure.partition(":")
            probed[probe.name] = getattr(importlib.import_module(module), function)(run)
    return probed


def measure_context(result: WatchResult, subject: RunSubject | None = None, hardware: HardwareReport | None = None,
                 dispatch_us: float | None = None, matmul_gflops: float | None = None,
                 launch_us: float | None = None, dtype_gflops: dict[str, float] | None = None,
                 optimizer_ms: tuple[float, float] | None = None,
                 rebuilt_ms: tuple[float, float] | None = None,
                 loader_ms: tuple[Handover | None, float | None] | None = None,
                 thread_rates: tuple[float, float] | None = None,
                 probed: dict[str, Any] | None = None,
                 thread_steps: tuple[float, float] | None = None) -> tuple[HardwareReport, Context]:
    """Measure the machine constants the rules need for `result` (those not given). The probes draw random numbers
    (fresh tensors, a DataLoader's shuffle and seeds): torch's random state is put back after them, so that a
    script that asks for the result and trains on draws what it would have unwatched."""
    import torch

    devices = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        # the probes the verdicts about the script need, asked of the run those verdicts judge: beside busy processes
        # its phases less their waits (a float64 product that was half the script's own step was a sixth of the
        # loaded one and went unprobed; a tokenizing __getitem__'s wait, 39% of the judged step and 15% of the loaded
        # one, went without its handover probe, and workers were advised where they would not help)
        judged = script_view(result) or result
        busy = others_busy(result)  # other processes held the cores: the probes read one thread's time, or beside them
        dtypes = slow_dtype_candidates(judged) if dtype_gflops is None else []
        # a first matmul reading, a second away from the last one (the hardware's detection takes about that long)
        early = cpu_matmul_gflops() if matmul_gflops is None and hardware is None else None
        hw = hardware or detect_hardware()
        if dtype_gflops is None and "bfloat16" not in dtypes and bf16_candidate(judged, hw.cpu.native_bf16):
            dtypes.append("bfloat16")  # what bf16 autocast would save a float32 step doing real work
        dispatch = dispatch_us if dispatch_us is not None else cpu_dispatch_us()
        usable = usable_cores() if result.model.device == "cpu" else None
        keep = threads_candidate(result, hw.cpu.physical_cores or 1, usable)
        if matmul_gflops is not None:
            gflops = matmul_gflops
        else:  # what the CPU can do: with more threads than cores, the rate at the threads advised
            with intra_op_threads(keep):
                gflops = cpu_matmul_gflops()
        # the probes no round of the rate comparisons below depends on run in the pauses between their rounds
        spaced = Spacer({
            "optimizer": (lambda: _optimizer_probe(subject, judged)) if optimizer_ms is None else
            lambda: (optimizer_ms, None),
            "rebuilt": (lambda: _rebuild_probe(subject, result)) if rebuilt_ms is None else lambda: rebuilt_ms,
            "loader": (lambda: _loader_probes(subject, judged)) if loader_ms is None else lambda: loader_ms,
            "declared": lambda: _declared_probes(ProbeRun(result, judged, subject, busy), probed),
            "cells": lambda: _cell_probe(result, busy)})
        # each dtype against float32, on one thread's CPU time
        ratios = dtype_ratios(dtypes, pause=spaced) if dtypes else {}
        side = matmul_side(result)
        if thread_rates is None and keep is not None:
            thread_rates = thread_gflops(side, (result.process.torch_threads, keep), pause=spaced)
        # a step at the advised count: with more threads than cores, or than the cores other processes left
        fewer = keep if keep is not None and result.process.torch_threads > keep else \
            busy_keep(result, hw.cpu.logical_threads or 1) if result.model.device == "cpu" else None
        if thread_steps is None and fewer is not None:  # beside busy processes, mean steps: their slices lost too
            threads = (result.process.torch_threads, fewer)
            thread_steps = loaded_step_ms(side, threads) if busy else thread_step_ms(side, threads, pause=spaced)
        if launch_us is None and result.model.device == "cuda":
            launch_us = cuda_op_us()
        done = spaced.results()
        (optimizer_ms, optimizer_faults), rebuilt_ms, probed = done["optimizer"], done["rebuilt"], done["declared"]
        handover, batched = done["loader"]
        cells, cell_ops = done["cells"]
        if matmul_gflops is None:  # read again after the other probes: a moment of a shared machine
            earlier = [gflops] + ([early] if early is not None and keep in (None, torch.get_num_threads()) else [])
            with intra_op_threads(keep):  # is not what its CPU can do
                gflops = settled_gflops(earlier, cpu_matmul_gflops)
        if dtype_gflops is None:  # the float32 rate at the run's threads, in each dtype's proportion to it
            dtype_gflops = {name: gflops * ratio for name, ratio in ratios.items()}
        largest = None
        if result.process.peak_memory_bytes and result.process.memory_capacity_bytes and \
                result.process.peak_memory_bytes / result.process.memory_capacity_bytes >= MEMORY_SHARE:
            largest = _largest_batch(subject, result)
        ctx = Context(dispatch_us=dispatch, matmul_gflops=gflops, physical_cores=hw.cpu.physical_cores or 1,
                      logical_threads=hw.cpu.logical_threads or 1, largest_batch=largest, cuda_op_us=launch_us,
                      dtype_gflops=dtype_gflops, optimizer_ms=optimizer_ms,
                      optimizer_faults=optimizer_faults, rebuild_ms=rebuilt_ms, handover=handover,
                      batched_ms=batched, thread_gflops=thread_rates, thread_step_ms=thread_steps, usable_cores=usable, probed=probed,
                      gpu_peak=_gpu_peak(hw, result, subject), cell_ms=cells, cell_ops=cell_ops)
    return hw, ctx


def machine_context() -> tuple[HardwareReport, Context]:
    """The machine's constants that no run's shapes are needed for (the hardware, one op's dispatch, the float32
    matmul rate): measured before a script starts, for `doctor --report-every`'s interim reports, which judge the
    run so far while its hooks are in (no probe may run a model or an optimizer then)."""
    import torch

    with torch.random.fork_rng(devices=[]):
        hw = detect_hardware()
        ctx = Context(dispatch_us=cpu_dispatch_us(), matmul_gflops=cpu_matmul_gflops(),
                      physical_cores=hw.cpu.physical_cores or 1, logical_threads=hw.cpu.logical_threads or 1)
    return hw, ctx


def diagnose_run(result: WatchResult, subject: RunSubject | None = None, hardware: HardwareReport | None = None,
                 **given: Any) -> DoctorReport:
    """Measure what `result`'s rules need (`measure_context`; `given` readings are taken as they are), then judge
    it (`diagnose.report.judge`)."""
    t0 = time.perf_counter()
    hw, ctx = measure_context(result, subject, hardware, **given)
    return dataclasses.replace(judge(result, ctx, hw), probes_s=round(time.perf_counter() - t0, 2))
