"""JSON renderings of result objects, with the schema names other tools rely on."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import TYPE_CHECKING, Any

from trainspeed._version import __version__
from trainspeed.demo.result import DemoResult
from trainspeed.diagnose.compare import SCHEMA as COMPARISON_SCHEMA
from trainspeed.diagnose.compare import Comparison
from trainspeed.diagnose.op_clock import phase_ops
from trainspeed.diagnose.report import DoctorReport
from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.step_model import flop_rate
from trainspeed.hardware.report import HardwareReport
from trainspeed.load.result import Load
from trainspeed.report.patch import patch_dict
from trainspeed.report.tried import tried_dict
from trainspeed.watch.result import Steps, WatchResult
from trainspeed.watch.sites import SyncSite

if TYPE_CHECKING:  # their packages load the estimator and the knobs: 60 ms of every doctor run that needs neither
    from trainspeed.memory.result import MemoryReport
    from trainspeed.sweep.result import SweepResult

HW_SCHEMA = "trainspeed.hw/1"
MEMORY_SCHEMA = "trainspeed.memory/1"
DOCTOR_SCHEMA = "trainspeed.doctor/1"
DEMO_SCHEMA = "trainspeed.demo/1"
SWEEP_SCHEMA = "trainspeed.sweep/1"
COMPARE_SCHEMA = COMPARISON_SCHEMA


def _clean(value: Any) -> Any:
    """Plain JSON values: dataclasses to dicts, NaN/inf to null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _clean(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def hardware_dict(report: HardwareReport) -> dict[str, Any]:
    """The `trainspeed hw --json` object (docs/json.md)."""
    cpu = _clean(report.cpu)
    cpu.pop("flags", None)  # the full flag list is noise; `features` keeps what matters
    gpus = []
    for g in report.gpu.gpus:
        d = _clean(g)
        d["product"] = _clean(g.product)
        gpus.append(d)
    return {
        "schema": HW_SCHEMA,
        "cpu": cpu,
        "gpus": gpus,
        "cuda_available": report.gpu.cuda_available,
        "nvml_available": report.gpu.nvml_available,
        "note": report.gpu.note,
        "torch": report.torch_version,
        "python": report.python_version,
        "os": report.os,
    }


def demo_dict(result: DemoResult, hardware: HardwareReport | None = None,
              files: dict[str, str] | None = None, doctor: dict[str, DoctorReport] | None = None) -> dict[str, Any]:
    """The `trainspeed demo --json` object (docs/json.md)."""
    runs = [
        {
            "device": r.device, "variant": r.variant, "seconds": r.seconds,
            "us_per_epoch": r.us_per_epoch, "syncs": r.syncs, "syncs_by_op": r.syncs_by_op,
            "final_loss": r.final_loss, "test_accuracy": r.test_accuracy, "records": r.records,
            "epochs": r.epochs, "chunk_seconds": r.chunk_seconds,
            **({"strategy": r.strategy} if r.variant == "fit" else {}),
            **({"threads": r.threads} if r.threads is not None else {}),
        }
        for r in result.runs
    ]
    out: dict[str, Any] = {
        "schema": DEMO_SCHEMA,
        "epochs": result.epochs,
        "devices": result.devices,
        "torch_threads": result.torch_threads,
        "starts": [{"device": s.device, "epochs": s.epochs, "us_per_epoch": {str(k): v for k, v in s.us_per_epoch.items()},
                    "threads": s.threads, "others_cores": s.others_cores, "cores": s.cores} for s in result.starts],
        "runs": _clean(runs),
        "explanation": "\n".join(result.explanation),
        "explanation_lines": result.explanation,
    }
    if hardware is not None:
        out["hardware"] = hardware_dict(hardware)
    if doctor:
        out["doctor"] = {
            device: {"steps": {"seen": rep.watch.steps.seen, "median_ms": rep.watch.steps.median_ms},
                     "phases": _phases(rep.watch), "verdicts": _clean(rep.verdicts),
                     "others_cpu_cores": _load(rep.watch).others_cpu_cores}
            for device, rep in doctor.items()
        }
    if files:
        out["files"] = files
    return out


def memory_dict(report: MemoryReport) -> dict[str, Any]:
    """The `trainspeed memory --json` object (docs/json.md)."""
    est, search, measured = report.estimate, report.search, report.measured
    out: dict[str, Any] = {
        "schema": MEMORY_SCHEMA,
        "model": report.model,
        "batch_size": report.batch_size,
        "input_shape": report.input_shape,
        "input_dtype": report.input_dtype,
        "bytes": None,
        "per_sample_bytes": None,
        "fixed_bytes": None,
        "max_batch": search.max_batch if search else None,
        "measured": {"peak_bytes": measured.peak_bytes, "device": measured.device, "method": measured.method}
        if measured else None,
        "notes": report.notes,
        "estimate_seconds": report.estimate_seconds,
        "fewest_ranks": _clean(report.fewest_ranks) if report.fewest_ranks is not None else None,
    }
    if est is not None:
        out.update({
            "bytes": {**est.breakdown, "total": est.total_bytes},
            "per_sample_bytes": est.per_sample_bytes,
            "fixed_bytes": est.fixed_bytes,
            "peak_phase": est.peak_phase,
            "device": est.device,
            "optimizer": est.optimizer,
            "amp": est.amp,
            "checkpointing": est.checkpointing,
            "world_size": est.world_size,
            "shard": est.shard,
            "fsdp_param_dtype": est.fsdp_param_dtype,
            "cpu_offload": est.cpu_offload,
            "host_bytes": est.host_bytes,
            "param_count": est.param_count,
            "layers": _clean(est.layers),
            "notes": report.notes + est.notes,
        })
    if search is not None:
        out["search"] = _clean(search)
    if report.error_pct is not None:
        out["error_pct"] = report.error_pct
    return out


def _read_rows(sites: list[SyncSite]) -> list[dict[str, Any]]:
    """Reads by place, with docs/json.md's keys for `sync_sites` (the source line left out)."""
    return [{"where": s.where, "op": s.op, "count": s.count, "total_ms": s.total_ms} for s in sites]


def _flop_rate(report: DoctorReport) -> dict[str, Any] | None:
    """CUDA: the step's achieved TFLOP/s against the GPU's peak (docs/json.md's `flop_rate`)."""
    rate = flop_rate(report.watch, report.context)
    if rate is None:
        return None
    return {"tflops": rate.tflops, "peak_tflops": rate.peak.tflops, "math": rate.peak.math, "gpu": rate.peak.gpu,
            "share": rate.share}


def _load(w: WatchResult) -> Load:
    """The run's load part (all None where nothing of it was read)."""
    return w.load or Load()


def _phases(w: WatchResult) -> dict[str, Any]:
    """docs/json.md's `phases`: each phase's times and share, and its wait for a core (the load's)."""
    load = _load(w)
    return {name: {**_clean(stat), **_clean(load.phase(name))} for name, stat in w.phases.items()}


def _steps(s: Steps) -> dict[str, Any]:
    return {"seen": s.seen, "measured": s.measured, "median_ms": s.median_ms, "p90_ms": s.p90_ms, "mean_ms": s.mean_ms,
            "host_median_ms": s.host_median_ms}


def _ops_by_phase(w: WatchResult) -> dict[str, dict[str, float]]:
    """docs/json.md's `per_step.ops_by_phase`: each phase's window ops against the phase (`diagnose.op_clock`)."""
    found = (phase_ops(w, p) for p in w.window.op_calls_by_phase)
    return {o.phase: {"calls": o.calls, "ms": o.ops_ms, "phase_ms": o.phase_ms, "excess_us": o.excess_us}
            for o in found if o is not None}


def _per_step(w: WatchResult) -> dict[str, Any]:
    """docs/json.md's `per_step`: the steps' own counts, the profiler window's and the page faults."""
    s, win = w.steps, w.window
    return {"syncs": s.syncs_per_step, "host_reads": s.host_reads_per_step, "h2d_bytes": s.h2d_bytes_per_step,
            "ops": win.ops_per_step, "kernels": win.kernels_per_step, "flops": win.flops_per_step,
            "gpu_busy_ms": win.gpu_busy_ms_per_step, "ops_in_other": win.other_ops_per_step,
            "ops_in_other_ms": win.other_op_ms_per_step, "ops_in_edges": win.edge_ops_per_step,
            "ops_ms": win.op_ms_per_step, "ops_by_phase": _ops_by_phase(w), "micro_batches": s.micro_batches_per_step,
            "model_calls": s.model_calls_per_step, "model_calls_chained": s.model_calls_chained,
            "model_calls_after_read": s.model_calls_after_read, "optimizer_steps": s.optimizer_steps_per_step,
            "anomaly_ms": s.anomaly_ms_per_step, "recompute_ms": s.recompute_ms_per_step,
            "page_faults": w.machine.page_faults_per_step, "page_faults_early": w.machine.page_faults_early_per_step,
            "page_faults_optimizer": w.optimizers.page_faults}


def doctor_dict(report: DoctorReport) -> dict[str, Any]:
    """The `trainspeed doctor --json` object (docs/json.md): its sections in their documented order."""
    return {**_run(report), **_measured(report.watch), "verdicts": _verdicts(report), **_made(report),
            **_resources(report.watch), "probe": _probe(report.context),
            "probes_s": report.probes_s, **_closing(report)}


def _run(report: DoctorReport) -> dict[str, Any]:
    """What ran: the schema, the command and the script, how it ended, the hardware."""
    return {"schema": DOCTOR_SCHEMA, "version": __version__, "command": report.command, "when": report.when,
            "script": report.script, "exit_code": report.exit_code, "error": report.error,
            "window": _clean(report.watch.run_window) if report.watch.run_window is not None else None,
            "hardware": hardware_dict(report.hardware), "device": report.watch.model.device}


def _measured(w: WatchResult) -> dict[str, Any]:
    """The steps, their phases and counts, and where the time went by line."""
    return {
        "steps": _steps(w.steps), "phases": _phases(w), "per_step": _per_step(w),
        "sync_sites": _read_rows(w.reads.sync_sites),
        "saves": {"count": w.checkpoints.saves, "every_steps": w.checkpoints.every_steps, "calls": w.checkpoints.calls},
        "host_read_sites": _read_rows(w.reads.host_read_sites), "other_sites": _clean(w.sites.other),
        "framework_sites": _clean(w.sites.framework), "data_sites": _clean(w.sites.data),
        "worker_sites": _clean(w.sites.workers), "compiled": w.window.compiled, "autocast": w.model.autocast,
        "loop_sites": [{"where": o.where, "code": o.code, "samples": o.samples, "share_of_other": o.share_of_other}
                       for o in w.sites.loop],
        "gpu_util": {"available": w.gpu_util.available, "mean": w.gpu_util.mean, "samples": w.gpu_util.samples,
                     "sawtooth": w.gpu_util.sawtooth, "why": w.gpu_util.why},
    }


def _verdicts(report: DoctorReport) -> list[dict[str, Any]]:
    return [{**_clean(v), "predicted_process_speedup": report.process_speedup(v)} for v in report.verdicts]


def _made(report: DoctorReport) -> dict[str, Any]:
    """How the script made its training: the process's time, the batch, the framework, the optimizer, the loaders, the
    evaluations."""
    w = report.watch
    return {
        "process": {"seconds": report.process_s, "loop_seconds": w.steps.loop_s},
        "batch_size": w.model.batch_size, "framework": _clean(w.framework),
        "optimizer": _clean(w.optimizers.info) if w.optimizers.info is not None else None,
        "optimizers_built": {"count": w.optimizers.built, "mean_ms": w.optimizers.build_ms,
                             "changes": w.optimizers.changes},
        "loaders": _clean(w.loaders.each), "evaluation": _clean(w.evaluation) if w.evaluation is not None else None,
        "loader_starts": {"count": w.loaders.starts, "share": w.loaders.start_share, "mean_ms": w.loaders.start_ms},
        "loader_workers": _clean(w.machine.loader_workers) if w.machine.loader_workers is not None else None,
        "compiles": _clean(w.machine.compiles) if w.machine.compiles is not None else None,
    }


def _resources(w: WatchResult) -> dict[str, Any]:
    """The process's threads and CPU, the machine's load, the memory, the ops by time."""
    load = _load(w)
    return {
        "torch_threads": w.process.torch_threads, "process_cpu_percent": w.process.cpu_percent,
        "process_threads": w.process.threads, "others_cpu_cores": load.others_cpu_cores,
        "threads_wait_ms": load.threads_wait_ms_per_step, "steal_share": load.steal_share,
        "threads_one_cpu_share": load.threads_one_cpu_share, "h2d_bytes_by_kind": w.model.h2d_bytes_by_kind,
        "peak_memory_bytes": w.process.peak_memory_bytes, "memory_capacity_bytes": w.process.memory_capacity_bytes,
        "ops_by_time": _clean(w.window.op_times) if w.window.op_times is not None else None,
    }


def _pair(values: tuple[float, float] | None, first: str, second: str) -> dict[str, float] | None:
    return {first: values[0], second: values[1]} if values else None


def _probe(c: Context) -> dict[str, Any]:
    """The machine's constants measured after the run, and the readings of the probes the rules declare."""
    return {"cpu_dispatch_us": c.dispatch_us, "cpu_matmul_gflops": c.matmul_gflops, "cuda_op_us": c.cuda_op_us,
            "cpu_matmul_gflops_by_dtype": c.dtype_gflops,
            "optimizer_step_ms": _pair(c.optimizer_ms, "configured", "fused"),
            "optimizer_step_page_faults": c.optimizer_faults,
            "optimizer_rebuild_ms": _pair(c.rebuild_ms, "built_and_stepped", "kept_step"),
            "loader_handover_ms": _clean(c.handover) if c.handover else None, "loader_batched_ms": c.batched_ms,
            "threads_matmul_gflops": _pair(c.thread_gflops, "as_run", "advised"),
            "threads_step_ms": _pair(c.thread_step_ms, "as_run", "advised"),
            "page_fault_us": c.probed.get("page_fault_us"), "cell_loop_ms": _pair(c.cell_ms, "stepped", "fused"),
            "cell_call_ops": c.cell_ops,
            **{name: _clean(value) for name, value in c.probed.items() if name != "page_fault_us"}}


def _closing(report: DoctorReport) -> dict[str, Any]:
    """The cell loop, the FLOP rate, the notes, the ranks, the samples behind `compare`, and `--try`'s runs."""
    w = report.watch
    return {"cell_loop": _clean(w.model.cell_loop) if w.model.cell_loop is not None else None,
            "flop_rate": _flop_rate(report), "notes": w.notes + report.notes,
            "distributed": _clean(w.distributed) if w.distributed is not None else None,
            "samples": {"step_ms": _clean(w.steps.times_ms), "phase_ms": _clean(w.steps.phase_samples_ms)},
            "tried": _clean(tried_dict(report.tried)) if report.tried is not None else None,
            "patch": patch_dict(report.patch) if report.patch is not None else None}


def sweep_dict(result: SweepResult) -> dict[str, Any]:
    """The `trainspeed sweep --json` object (docs/json.md): each point's knob-specific
    numbers sit beside the contract keys; knob-level findings (`fit` for record-every, `knee`,
    `grid`, ...) at the top level."""
    points = []
    for p in result.points:
        points.append({"value": p.value, "median_s": p.median_s, "ci_low": p.ci_low, "ci_high": p.ci_high,
                       "ok": p.ok, "error": p.error or None, "trials": p.trials, "predicted": p.predicted,
                       **p.extras})
    return _clean({"schema": SWEEP_SCHEMA, "knob": result.knob, "workload": result.workload, "device": result.device,
                   "steps": result.steps, "repeats": result.repeats, "points": points, **result.findings,
                   "best": result.best, "no_measurable_difference": result.same_as_best,
                   "recommendation": result.recommendation, "notes": result.notes})


def dumps(obj: dict[str, Any]) -> str:
    """Serialise with a stable layout (and a trailing newline)."""
    return json.dumps(obj, indent=2, allow_nan=False) + "\n"


def compare_dict(c: Comparison) -> dict[str, Any]:
    """The `trainspeed compare --json` object."""
    return _clean({"schema": COMPARE_SCHEMA, "a": c.a_path or c.a, "b": c.b_path or c.b, "a_label": c.a,
                   "b_label": c.b, "conclusion": c.conclusion, "line": c.line, "noise": c.noise,
                   "step": c.step, "phases": {ch.what: ch for ch in c.phases}, "verdicts": c.verdicts,
                   "notes": c.notes})
