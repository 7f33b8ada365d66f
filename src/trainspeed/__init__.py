"""trainspeed: why is my PyTorch training slow, and what exactly should I change?"""

from trainspeed import watch  # noqa: E402  (a callable package: trainspeed.watch(...) starts watching)
from trainspeed._version import __version__
from trainspeed.demo import DemoResult, DemoRun, run_demo  # noqa: E402
from trainspeed.doctor import Doctor, make_watch_callable  # noqa: E402
from trainspeed.hardware import (  # noqa: E402
    CpuInfo,
    GpuInfo,
    GpuProduct,
    HardwareReport,
    detect_hardware,
    parse_gpu_name,
)
from trainspeed.loop import FitResult, fit  # noqa: E402
from trainspeed.memory import MemoryEstimate, estimate_memory, measure_memory  # noqa: E402
from trainspeed.sweep import SweepResult, run_sweep  # noqa: E402
from trainspeed.watch import SyncCounter  # noqa: E402
from trainspeed.workloads.workload import Workload  # noqa: E402

make_watch_callable()  # trainspeed.watch(...) starts a Doctor; the package stays importable as a package


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
