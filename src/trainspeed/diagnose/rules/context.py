"""The machine's facts the rules need beside a run's measurements: the probes' readings after the run (`Context`,
measured in `trainspeed.measure`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainspeed.hardware.gpu import GpuPeak
from trainspeed.probe.readings import Handover


@dataclass(frozen=True)
class Context:
    """Facts about the machine that the rules need beside the measurements."""

    dispatch_us: float
    """Measured cost of one tiny CPU op (probe.cpu_dispatch_us)."""
    matmul_gflops: float
    """Measured CPU matmul rate (probe.cpu_matmul_gflops): how fast the step's arithmetic could run."""
    physical_cores: int
    logical_threads: int
    largest_batch: int | None = None
    """From the memory estimator, when memory pressure was found and an estimate could be made."""
    cuda_op_us: float | None = None
    """Measured cost of one tiny CUDA op (probe.cuda_op_us): dispatch plus a kernel launch. None without CUDA."""
    dtype_gflops: dict[str, float] = field(default_factory=dict)
    """CPU matmul rate in the dtypes `slow_dtype_candidates` names ("bfloat16": 1.3): `matmul_gflops` times the
    dtype's rate over float32's, both measured after the run on one thread's CPU time (`probe.matmul.dtype_ratios`)."""
    optimizer_ms: tuple[float, float] | None = None
    """One step of the run's optimizer over its parameters' shapes, measured after the run: (as configured,
    with fused=True) milliseconds; None when not probed (`optimizer_candidate`) or it has no fused kernel."""
    optimizer_faults: float | None = None
    """Minor page faults of one of those steps as configured (the median of the probe's; None: not probed, or not
    counted here): its temporaries' fresh pages in the probe's steps, back to back."""
    rebuild_ms: tuple[float, float] | None = None
    """The run's optimizer on its parameters' shapes, measured after the run: (built and stepped once, one step
    of one kept) milliseconds; None when not probed (`rebuilt_candidate`)."""
    handover: Handover | None = None
    """One worker process handing over batches shaped like the busiest loader's, measured after the run (None:
    not probed, `loader_candidate`)."""
    batched_ms: float | None = None
    """A batch of the busiest loader's TensorDataset taken whole (one index op per tensor), measured after the
    run; None unless that loader fetches a TensorDataset row by row."""
    usable_cores: int | None = None
    """CPUs this process may run on at once (affinity, cgroup quota: hardware.cpu.usable_cores); None: not known."""
    thread_gflops: tuple[float, float] | None = None
    """GFLOP/s of a matmul of the run's size at torch's threads as the run had them and as advised
    (`threads_candidate`), measured in turn after the run; None when not probed."""
    thread_step_ms: tuple[float, float] | None = None
    """Milliseconds of a small MLP's training step with the run's matrix size at torch's threads as the run had them
    and as advised, measured in turn after the run (`probe.thread_step`), where the run had more threads than cores
    or than the cores other processes left (then each count's mean step beside them: `loaded_step_ms`); None when not
    probed."""
    gpu_peak: GpuPeak | None = None
    """CUDA: the GPU's peak in the run's math mode (None: no CUDA run, or a GPU the spec table lacks)."""
    cell_ms: tuple[float, float] | None = None
    """The run's recurrent cell stepped over its sequence and the fused layer over the same sequence, forward and
    backward on the run's batch, ms, measured after the run (`probe.rnn`); None: no cell loop, or not probed."""
    cell_ops: int | None = None
    """The aten ops one call of the run's cell adds to a step, forward and backward (`probe.rnn.cell_call_ops`);
    None: no cell loop, or not counted."""
    probed: dict[str, Any] = field(default_factory=dict)
    """The readings of the probes the rules declare (`rules.probes.Probe`) that this run wanted, by name."""
