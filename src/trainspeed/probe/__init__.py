"""Machine constants, measured: what one op costs to dispatch (and launch) here, how fast arithmetic runs."""

from trainspeed.probe.dispatch import cpu_dispatch_us, cuda_op_us
from trainspeed.probe.matmul import cpu_matmul_gflops

__all__ = ["cpu_dispatch_us", "cpu_matmul_gflops", "cuda_op_us"]
