"""Machine constants, measured: what one op costs to dispatch (and launch) here, how fast arithmetic runs.

The names below load on first use (PEP 562): importing one of this package's modules (a torch-free one, `readings`)
does not import the probes, which import torch.
"""

from __future__ import annotations

from trainspeed._lazy import lazy_names

_WHERE = {"cpu_dispatch_us": "trainspeed.probe.dispatch", "cuda_op_us": "trainspeed.probe.dispatch",
          "cpu_matmul_gflops": "trainspeed.probe.matmul"}

__all__ = ["cpu_dispatch_us", "cpu_matmul_gflops", "cuda_op_us"]

__getattr__, __dir__ = lazy_names(__name__, _WHERE)
