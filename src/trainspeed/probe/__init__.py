"""Machine constants, measured: what one op costs to dispatch here, how fast arithmetic runs."""

from trainspeed.probe.dispatch import cpu_dispatch_us
from trainspeed.probe.matmul import cpu_matmul_gflops

__all__ = ["cpu_dispatch_us", "cpu_matmul_gflops"]
