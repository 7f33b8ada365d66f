"""trainspeed: why is my PyTorch training slow, and what exactly should I change?"""

import sys

from trainspeed import watch  # a callable package: trainspeed.watch(...) starts watching
from trainspeed._version import __version__
from trainspeed.demo import DemoResult, DemoRun, run_demo
from trainspeed.doctor import Doctor, make_watch_callable
from trainspeed.hardware import (
    CpuInfo,
    GpuInfo,
    GpuProduct,
    HardwareReport,
    detect_hardware,
    parse_gpu_name,
)
from trainspeed.loop import FitResult, fit
from trainspeed.memory import MemoryEstimate, estimate_memory, measure_memory
from trainspeed.sweep import SweepResult, run_sweep
from trainspeed.watch import SyncCounter
from trainspeed.workloads.workload import Workload

make_watch_callable()  # trainspeed.watch(...) starts a Doctor; the package stays importable as a package


def _render_in_ipython() -> None:
    """Inside IPython or Jupyter, the result objects render themselves as HTML in a bare expression from
    `import trainspeed` on (IPython's formatters; IPython is not imported where it is not already running)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if shell is not None and hasattr(shell, "display_formatter"):
        from trainspeed.notebook import register_formatters

        register_formatters(shell)


def load_ipython_extension(ipython: object) -> None:
    """`%load_ext trainspeed` in Jupyter or IPython: the `%%trainspeed` cell magic (trainspeed.notebook)."""
    from trainspeed.notebook import load_ipython_extension as load

    load(ipython)
Watcher = Doctor
"""`trainspeed.Watcher`: the watcher with `result()` (trainspeed.doctor.Doctor); `trainspeed.watch.Watcher`
measures only."""

__all__ = [
    "CpuInfo",
    "DemoResult",
    "DemoRun",
    "Doctor",
    "FitResult",
    "GpuInfo",
    "GpuProduct",
    "HardwareReport",
    "MemoryEstimate",
    "SweepResult",
    "SyncCounter",
    "Watcher",
    "Workload",
    "__version__",
    "detect_hardware",
    "estimate_memory",
    "fit",
    "measure_memory",
    "parse_gpu_name",
    "run_demo",
    "run_sweep",
    "watch",
]

_render_in_ipython()
