"""Count host reads of tensor values (each one a device synchronisation on a GPU) as they happen.

`loss.item()`, `float(loss)`, `f"{loss:.4f}"`, `print(loss)`, `t.tolist()`, `t.numpy()`, a
`.cpu()` of a device tensor, `if t:` ... all make the host wait for the device's queue to drain.
While a `SyncCounter` is active, the `torch.Tensor` methods behind those reads are wrapped
with a counter; the wrapped call is the original one, so values are untouched. A read made
from inside another (`__format__` calls `item()`) counts once.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

_TORCH_DIR = os.path.dirname(torch.__file__)
_OUR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_USER_CODE: dict[Any, bool] = {}  # code object -> is it the user's? (asked once per function)


def _is_user(code: Any) -> bool:
    user = _USER_CODE.get(code)
    if user is None:
        name = code.co_filename
        user = _USER_CODE[code] = not name.startswith((_TORCH_DIR, _OUR_DIR, "<frozen"))
    return user


def user_site(depth: int = 2) -> str:
    """`file:line` of the innermost frame outside torch and trainspeed (where the user's code asked)."""
    return _site_of(sys._getframe(depth))


_SITES: dict[tuple[Any, int], str] = {}  # (code, line) of a user frame -> "file:line" (formatted once)


def _site_of(frame: Any) -> str:
    while frame is not None:
        code = frame.f_code
        if _is_user(code):
            key = (code, frame.f_lineno)
            site = _SITES.get(key)
            if site is None:
                site = _SITES[key] = f"{code.co_filename}:{key[1]}"
            return site
        frame = frame.f_back
    return "?"


ReadCallback = Callable[[str, float, float, str], None]
"""on_read(op, t0, t1, site): called after each counted host read, which ran from t0 to t1
(time.perf_counter seconds) at the user's `file:line` site."""

# Tensor methods that hand tensor values to the host.
HOST_READ_METHODS = (
    "item", "tolist", "numpy", "cpu", "to",
    "__float__", "__int__", "__bool__", "__index__", "__complex__",
    "__format__", "__repr__", "__array__",
)


def _moves_to_host(name: str, tensor: torch.Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """`cpu()`/`to()` read values only when they bring a device tensor to the host."""
    if name == "cpu":
        return tensor.device.type != "cpu"
    if name == "to":
        if tensor.device.type == "cpu":
            return False
        try:
            device = torch._C._nn._parse_to(*args, **kwargs)[0]
        except Exception:  # let the real call raise its own error
            return False
        return device is not None and device.type == "cpu"
    return True


class _Registry:
    """The wrappers are installed once, while at least one counter is active."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: tuple[SyncCounter, ...] = ()
        self.timed: tuple[SyncCounter, ...] = ()
        """The active counters that time each read (tuples, replaced whole, so a wrapper
        iterating one is never disturbed by a counter entering or leaving)."""
        self.saved: dict[str, tuple[bool, Any]] = {}
        self.local = threading.local()
        self.reading = False
        """True while a counted read runs (a stack sampler on another thread skips those moments)."""

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        local = self.local
        reads_always = name not in ("cpu", "to")  # the others hand values to the host on every call
        getframe, clock = sys._getframe, time.perf_counter

        def wrapper(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            depth = getattr(local, "depth", 0)
            if depth != 0 or not (reads_always or _moves_to_host(name, tensor, args, kwargs)):
                local.depth = depth + 1
                try:
                    return original(tensor, *args, **kwargs)
                finally:
                    local.depth = depth
            local.depth = 1
            self.reading = True
            t0 = clock()
            try:
                return original(tensor, *args, **kwargs)
            finally:
                t1 = clock()
                local.depth = 0
                self.reading = False
                for counter in self.active:
                    counter._record(name)
                timed = self.timed
                if timed:
                    site = _site_of(getframe(1))
                    for counter in timed:
                        counter.on_read(name, t0, t1, site)  # type: ignore[misc]

        wrapper.__name__ = getattr(original, "__name__", name)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        return wrapper

    def add(self, counter: SyncCounter) -> None:
        with self.lock:
            if not self.active:
                for name in HOST_READ_METHODS:
                    own = name in torch.Tensor.__dict__
                    original = getattr(torch.Tensor, name)
                    self.saved[name] = (own, torch.Tensor.__dict__.get(name))
                    setattr(torch.Tensor, name, self._wrap(name, original))
            self.active += (counter,)
            self.timed = tuple(c for c in self.active if c.on_read is not None)

    def remove(self, counter: SyncCounter) -> None:
        with self.lock:
            self.active = tuple(c for c in self.active if c is not counter)
            self.timed = tuple(c for c in self.active if c.on_read is not None)
            if not self.active:
                for name, (own, value) in self.saved.items():
                    if own:
                        setattr(torch.Tensor, name, value)
                    else:
                        delattr(torch.Tensor, name)
                self.saved.clear()


_REGISTRY = _Registry()


def reading() -> bool:
    """Whether a counted host read is running right now (on whichever thread)."""
    return _REGISTRY.reading


class SyncCounter:
    """Context manager counting host reads of tensor values; `count` and `by_op` hold the tally."""

    def __init__(self, on_read: ReadCallback | None = None) -> None:
        self.count = 0
        self.by_op: Counter[str] = Counter()
        self.on_read = on_read
        """Called after each read with (op, t0, t1, user file:line); None keeps counting cheap."""

    def _record(self, name: str) -> None:
        # reads that count happen on the thread that made them; DataLoader workers are processes
        self.count += 1
        self.by_op[name] += 1

    def __enter__(self) -> SyncCounter:
        _REGISTRY.add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _REGISTRY.remove(self)
