"""How long one optimizer step takes on a model's parameter shapes, as configured and fused.

A torch.optim optimizer on the CPU (and one made with foreach=False anywhere) updates its parameter
tensors one at a time: a few ops per tensor, each paying its dispatch. `fused=True` (Adam, AdamW, SGD,
Adagrad; on the CPU since torch 2.4) updates them all in one kernel. The probe steps two optimizers of
the same class and settings over fresh tensors of the same shapes, dtype and device: nothing of the
user's (parameters, gradients, optimizer state) is touched.
"""

from __future__ import annotations

import inspect
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from trainspeed.probe.page_faults import faults_since, minor_faults

PROBE_ELEMENTS = 20_000_000
"""Parameters beyond this many elements are not probed (the probe holds its own copies of them, their
gradients and the optimizer's state, twice)."""
_NOT_SETTINGS = ("foreach", "fused", "differentiable", "capturable")


@dataclass(frozen=True)
class OptimizerSpec:
    """What the probe needs of the run's optimizer, taken at its first step (no reference to it is kept)."""

    cls: type
    shapes: list[tuple[int, ...]]
    dtype: torch.dtype
    device: str
    settings: dict[str, Any]
    """Its defaults other than foreach, fused, differentiable and capturable (lr, betas, weight_decay...)."""
    foreach: bool | None
    fused: bool | None
    differentiable: bool


def spec_of(optimizer: torch.optim.Optimizer) -> OptimizerSpec | None:
    """The probe's view of `optimizer`; None for one without parameters or with mixed dtypes or devices."""
    try:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        defaults = dict(optimizer.defaults)
    except Exception:  # not shaped like torch.optim's
        return None
    if not params or not all(isinstance(p, torch.Tensor) for p in params) or \
            len({(p.dtype, p.device) for p in params}) != 1:
        return None
    accepted = _init_parameters(type(optimizer))  # AdamW keeps Adam's decoupled_weight_decay in its defaults
    return OptimizerSpec(type(optimizer), [tuple(p.shape) for p in params], params[0].dtype, str(params[0].device),
                         {k: v for k, v in defaults.items()
                          if k not in _NOT_SETTINGS and (accepted is None or k in accepted)},
                         defaults.get("foreach"), defaults.get("fused"), bool(defaults.get("differentiable")))


def step_ms(spec: OptimizerSpec, fused: bool | None, repeats: int = 5,
            now: Callable[[], float] = time.perf_counter) -> float | None:
    """Median milliseconds of one step over fresh tensors shaped as the run's parameters: with `fused=True`,
    or (None) as the run configured it. None when that optimizer cannot be made (a class without a fused
    implementation, or none for this device or dtype) or the parameters are too many to copy."""
    reading = step_reading(spec, fused, repeats, now)
    return reading[0] if reading is not None else None


def step_reading(spec: OptimizerSpec, fused: bool | None, repeats: int = 5,
                 now: Callable[[], float] = time.perf_counter) -> tuple[float, float | None] | None:
    """`step_ms`'s median milliseconds, and the median minor page faults of those steps (None where the system does
    not count them): a step's temporaries take fresh pages where the allocator handed their blocks back to the system,
    which in the probe's steps, back to back, it may do less or more than in the run's."""
    if _too_big(spec):
        return None
    try:
        opt = spec.cls(_params(spec), **_settings(spec, fused))
        for _ in range(2):  # the state is made on the first step
            opt.step()
        faults: list[int] = []
        ms = _median_ms(opt.step, spec, repeats, now, faults)
        return ms, statistics.median(faults) if faults else None
    except Exception:  # no fused kernel for this class, device or dtype: nothing to compare
        return None


def rebuild_ms(spec: OptimizerSpec, repeats: int = 5,
               now: Callable[[], float] = time.perf_counter) -> tuple[float, float] | None:
    """(building the run's optimizer and taking its first step, one step of an optimizer kept from step to
    step): median milliseconds over fresh tensors shaped as the run's parameters, as configured. The first
    step of a new optimizer also makes its state (Adam's two moment tensors per parameter, SGD's momentum
    buffers). None when it cannot be made or the parameters are too many to copy."""
    if _too_big(spec):
        return None
    try:
        params, settings = _params(spec), _settings(spec, None)
        spec.cls(params, **settings).step()  # first-use costs of the class, once per process

        def build_and_step() -> None:
            spec.cls(params, **settings).step()

        fresh = _median_ms(build_and_step, spec, repeats, now)
        kept = spec.cls(params, **settings)
        for _ in range(2):
            kept.step()
        return fresh, _median_ms(kept.step, spec, repeats, now)
    except Exception:  # not constructible from its defaults alone
        return None


def _too_big(spec: OptimizerSpec) -> bool:
    return sum(math.prod(s) for s in spec.shapes) > PROBE_ELEMENTS


def _params(spec: OptimizerSpec) -> list[torch.Tensor]:
    """Zero parameters of the run's shapes, dtype and device, each with a small gradient."""
    params = [torch.zeros(s, dtype=spec.dtype, device=spec.device, requires_grad=True) for s in spec.shapes]
    for p in params:
        p.grad = torch.full_like(p, 1e-3)
    return params


def _settings(spec: OptimizerSpec, fused: bool | None) -> dict[str, Any]:
    settings = dict(spec.settings)
    if fused:
        settings["fused"] = True
    else:
        settings.update((k, v) for k, v in (("foreach", spec.foreach), ("fused", spec.fused)) if v is not None)
    return settings


def _median_ms(run: Callable[[], Any], spec: OptimizerSpec, repeats: int, now: Callable[[], float],
               faults: list[int] | None = None) -> float:
    """Median milliseconds of `run()`, the device synchronised before and after each on CUDA; each run's minor page
    faults appended to `faults` where given (and counted here)."""
    cuda = spec.device.startswith("cuda")
    times = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
        f0 = minor_faults() if faults is not None else None
        t0 = now()
        run()
        if cuda:
            torch.cuda.synchronize()
        times.append((now() - t0) * 1e3)
        if faults is not None and f0 is not None:
            faults.append(faults_since(f0))
    return statistics.median(times)


def _init_parameters(cls: type) -> set[str] | None:
    """The keyword arguments `cls(...)` takes; None when it takes any (**kwargs) or cannot be read."""
    try:
        params = inspect.signature(cls.__init__).parameters  # type: ignore[misc]  # the class's own __init__
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return set(params)
