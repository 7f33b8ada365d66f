"""trainspeed: why is my PyTorch training slow, and what exactly should I change?

The names below load on first use (PEP 562): `import trainspeed` and the command line's `--help` do not import
torch. `trainspeed.watch` is both the package `watch/` and the function that starts watching: whichever way the
package is first imported, this module makes its module object callable as it is bound here (`_Package`).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from trainspeed._version import __version__ as __version__

_WHERE = {
    "CpuInfo": "trainspeed.hardware", "GpuInfo": "trainspeed.hardware", "GpuProduct": "trainspeed.hardware",
    "HardwareReport": "trainspeed.hardware", "detect_hardware": "trainspeed.hardware",
    "parse_gpu_name": "trainspeed.hardware",
    "DemoResult": "trainspeed.demo", "DemoRun": "trainspeed.demo", "run_demo": "trainspeed.demo",
    "Doctor": "trainspeed.doctor",
    "FitResult": "trainspeed.loop", "fit": "trainspeed.loop",
    "MemoryEstimate": "trainspeed.memory", "estimate_memory": "trainspeed.memory",
    "measure_memory": "trainspeed.memory",
    "SweepResult": "trainspeed.sweep", "run_sweep": "trainspeed.sweep",
    "SyncCounter": "trainspeed.watch",
    "Workload": "trainspeed.workloads.workload",
}
"""Each public name, by the module that defines it."""

__all__ = sorted([*_WHERE, "Watcher", "__version__", "watch"])


class _CallableWatch(types.ModuleType):
    """The package `trainspeed.watch`, callable: `trainspeed.watch(...)` starts a `Doctor` (trainspeed.doctor.watch),
    while `import trainspeed.watch.syncs` keeps working and `watch/` itself stays free of the verdicts."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from trainspeed.doctor import watch

        return watch(*args, **kwargs)


class _Package(types.ModuleType):
    """This package's module: binding its submodule `watch` (as the import system does after importing it) makes
    that module callable."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "watch" and isinstance(value, types.ModuleType) and not isinstance(value, _CallableWatch):
            value.__class__ = _CallableWatch
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name == "watch":
        return importlib.import_module("trainspeed.watch")  # binding it here makes it callable (_Package)
    if name == "Watcher":  # `trainspeed.Watcher`: the watcher with `result()`; `trainspeed.watch.Watcher` measures only
        name = "Doctor"
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'trainspeed' has no attribute {name!r}")
    return getattr(importlib.import_module(where), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def load_ipython_extension(ipython: object) -> None:
    """`%load_ext trainspeed` in Jupyter or IPython: the `%%trainspeed` cell magic (trainspeed.notebook)."""
    from trainspeed.notebook import load_ipython_extension as load

    load(ipython)

