"""The step-time model of an eager training step on a GPU, for when there is no GPU to measure.

A step of `ops` eager ops and `flops` floating-point operations takes

    host   = ops x (dispatch_us + LAUNCH_US)        the CPU issuing the work
    device = flops / (peak_fp32 x EFFICIENCY) + ops x KERNEL_MIN_US
    step   = max(host, device)                      (no host read in the step: they overlap)

`dispatch_us` is this CPU's measured cost of one op; the peak comes from the spec table of
the reference GPU (trainspeed.hardware.specs, cited data sheets). The launch cost below is the demo's
measurement on one machine, the other two constants are assumptions: every number from this model is labelled
predicted, and a recommendation made from it names the GPU it assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainspeed.errors import UsageError
from trainspeed.hardware.names import parse_gpu_name
from trainspeed.hardware.specs import lookup_spec

LAUNCH_US = 13.0
"""Host cost of launching one CUDA kernel, on top of the op's dispatch (cudaLaunchKernel and PyTorch's CUDA
bookkeeping): the demo's tiny CUDA op against its CPU op on a GPU VM (BENCHMARKS.md, "The seed experiment", GPU),
about 13 us a launch. A bare-metal machine may launch faster; a smaller
value here made the seed's Iris job look faster on a GPU, the opposite of what the demo measures."""
KERNEL_MIN_US = 2.0
"""Assumed shortest time one kernel keeps the GPU busy, however little it computes."""
EFFICIENCY = 0.5
"""Assumed share of the spec-sheet FP32 peak that a training step's kernels reach."""


@dataclass(frozen=True)
class GpuModel:
    name: str
    fp32_tflops: float
    dispatch_us: float

    def step_s(self, ops: int, flops: float) -> float:
        host = ops * (self.dispatch_us + LAUNCH_US) * 1e-6
        device = flops / (self.fp32_tflops * 1e12 * EFFICIENCY) + ops * KERNEL_MIN_US * 1e-6
        return max(host, device)

    def describe(self) -> str:
        return (f"predicted for an {self.name} ({self.fp32_tflops:g} TFLOP/s FP32 peak, spec sheet): step = "
                f"max(ops x ({self.dispatch_us:.1f} us measured dispatch + {LAUNCH_US:g} us launch, as the demo "
                f"measured on an H100 VM), FLOPs / ({EFFICIENCY:.0%} of peak, assumed) + ops x {KERNEL_MIN_US:g} us)")

    def label(self) -> str:
        """What a recommendation made from this model says of itself."""
        return f"predicted for an {self.name}, not measured: no CUDA device here"


def reference_gpu(name: str, dispatch_us: float) -> GpuModel:
    """The model for a GPU named like `RTX 3080` or `H100 SXM`; UsageError when its peak is unknown."""
    key, spec = lookup_spec(parse_gpu_name(name))
    if spec is None or spec.fp32 is None:
        raise UsageError(f"--gpu {name!r}: no FP32 peak for it in the spec table (known examples: RTX 3080, "
                         "RTX 4090, A100 SXM 40GB, H100 SXM)")
    return GpuModel(key, spec.fp32, dispatch_us)
