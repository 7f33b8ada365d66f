"""FSDP2's sharding units as the script makes them, and what their hooks cost the host.

Each `fully_shard(module, ...)` call is read as it is made (torch.distributed.fsdp.fully_shard is wrapped while
watching): its parameters' bytes and the settings it was given. FSDP2's hooks around each unit (its pre- and
post-forward, pre- and post-backward and the root's end of backward: copying parameters into and out of the
all-gather buffers, resharding, the gradients into the reduce-scatter's) are timed on the host, less the collectives
they waited for (those are the `comm` phase's): FSDP's own work per step, which grows with the number of units.

`UnitsTracker` owns the units and that time; its part is an `FsdpLayout` (watch/dist_result.py).
"""

from __future__ import annotations

import functools
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from trainspeed._after_import import AfterImport
from trainspeed.watch.dist_result import FsdpLayout

PLACES = ("torch.distributed.fsdp", "torch.distributed._composable.fsdp")
"""Where scripts and frameworks import fully_shard from."""


@dataclass
class _Unit:
    module: weakref.ref[torch.nn.Module]
    nbytes: int
    """The parameters this unit manages (not a nested unit's), unsharded."""
    reshard: bool | None
    """reshard_after_forward as given; None: FSDP2's default (True, and False for the root)."""
    mesh_dims: int
    param_dtype: str | None
    offload: bool


def _own_bytes(module: torch.nn.Module) -> int:
    """Bytes of `module`'s parameters that no earlier fully_shard took (those are DTensors by now)."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # torch < 2.5
        from torch.distributed._tensor import DTensor
    return sum(p.numel() * p.element_size() for p in module.parameters() if not isinstance(p, DTensor))


HOOKS: dict[str, tuple[str, tuple[str, ...]]] = {
    f"{home}.{module}": (owner, methods)
    for home in ("torch.distributed.fsdp._fully_shard", "torch.distributed._composable.fsdp")
    for module, owner, methods in (("_fsdp_state", "FSDPState",
                                    ("_pre_forward", "_post_forward", "_root_post_backward_final_callback")),
                                   ("_fsdp_param_group", "FSDPParamGroup", ("pre_backward", "post_backward")))}
"""FSDP2's per-unit hooks: module -> (class, methods) (torch >= 2.6 keeps them under fsdp._fully_shard, earlier under
_composable.fsdp)."""


class UnitsTracker:
    def __init__(self, comm_waited: Callable[[], float], now: Callable[[], float] = time.perf_counter) -> None:
        """`comm_waited()`: seconds the host has waited for collectives so far (CollectiveTimer.waited_s)."""
        self.units: list[_Unit] = []
        self.comm_waited = comm_waited
        self.now = now
        self.host_s: dict[str, float] = {}
        """FSDP's hooks' host time, less their collectives' waits, since the last `take_host`, per hook."""
        self._depth = 0
        self._undo: list[Callable[[], None]] = []
        self._finder = AfterImport(frozenset((*PLACES, *HOOKS)), self._on_load)

    def take_host(self) -> dict[str, float]:
        seconds, self.host_s = self.host_s, {}
        return seconds

    def install(self) -> None:
        """Wrap fully_shard and FSDP2's hooks as their modules load (or at once where the script loaded them):
        importing FSDP here would cost every script half a second of start-up (it pulls in DTensor and sympy)."""
        self._finder.install()

    def _on_load(self, module: ModuleType) -> None:
        if module.__name__ in PLACES:
            original = getattr(module, "fully_shard", None)
            if original is not None and not getattr(original, "_trainspeed", False):
                setattr(module, "fully_shard", self._wrap(original))  # noqa: B010 - a module found at run time
                self._undo.append(functools.partial(setattr, module, "fully_shard", original))
        owner_name, methods = HOOKS.get(module.__name__, ("", ()))
        owner = getattr(module, owner_name, None) if owner_name else None
        for method in methods if owner is not None else ():
            original = owner.__dict__.get(method)
            if callable(original) and not getattr(original, "_trainspeed", False):
                setattr(owner, method, self._timed(original))
                self._undo.append(functools.partial(setattr, owner, method, original))

    def _timed(self, original: Callable[..., Any]) -> Callable[..., Any]:
        tracker = self
        name = original.__name__.strip("_")

        @functools.wraps(original)
        def hook(*args: Any, **kwargs: Any) -> Any:
            if tracker._depth:
                return original(*args, **kwargs)
            tracker._depth = 1
            waited, t0 = tracker.comm_waited(), tracker.now()
            try:
                return original(*args, **kwargs)
            finally:
                spent = max(0.0, tracker.now() - t0 - (tracker.comm_waited() - waited))
                tracker.host_s[name] = tracker.host_s.get(name, 0.0) + spent
                tracker._depth = 0

        hook._trainspeed = True  # type: ignore[attr-defined]
        return hook

    def uninstall(self) -> None:
        self._finder.uninstall()
        while self._undo:
            self._undo.pop()()

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        tracker = self

        @functools.wraps(original)
        def fully_shard(module: Any, *args: Any, **kwargs: Any) -> Any:
            modules = [module] if isinstance(module, torch.nn.Module) else list(module)
            sizes = [_own_bytes(m) for m in modules]
            result = original(module, *args, **kwargs)
            try:
                tracker._record(modules, sizes, kwargs)
            except Exception:  # noqa: BLE001 - reading the settings never breaks the script's call
                pass
            return result

        fully_shard._trainspeed = True  # type: ignore[attr-defined]
        return fully_shard

    def _record(self, modules: list[torch.nn.Module], sizes: list[int], kwargs: dict[str, Any]) -> None:
        mesh = kwargs.get("mesh")
        mp = kwargs.get("mp_policy")
        param_dtype = getattr(mp, "param_dtype", None)
        offload = type(kwargs.get("offload_policy")).__name__ == "CPUOffloadPolicy"
        reshard = kwargs.get("reshard_after_forward")
        self.units.append(_Unit(weakref.ref(modules[0]), sum(sizes), bool(reshard) if reshard is not None else None,
                                getattr(mesh, "ndim", 1) if mesh is not None else 1,
                                str(param_dtype).replace("torch.", "") if param_dtype is not None else None, offload))

    def part(self) -> FsdpLayout | None:
        if not self.units:
            return None
        alive = [(u, u.module()) for u in self.units]
        roots = []
        for u, m in alive:
            inside = any(o is not m and o is not None and m is not None and any(s is m for s in o.modules())
                         for _, o in alive)
            if not inside:
                roots.append(u)
        root = roots[-1] if roots else self.units[-1]
        resharding = [u for u in self.units if u.reshard or (u.reshard is None and u is not root)]
        return FsdpLayout(
            units=len(self.units), unit_bytes=[u.nbytes for u in self.units], root_bytes=root.nbytes,
            resharding=len(resharding), resharding_bytes=sum(u.nbytes for u in resharding),
            mesh_dims=max(u.mesh_dims for u in self.units),
            param_dtype=root.param_dtype, cpu_offload=any(u.offload for u in self.units))
