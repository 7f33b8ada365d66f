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


_USER_CODE: dict[int, tuple[bool, Any]] = {}
"""id(code) -> (is it the user's?, the code, kept alive so that its id is not reused while here).
Keyed by id: hashing a code object hashes its constants and names every time, recursively through
every function it defines (a microsecond for a small script's module code, tens for a large one)."""


def is_user_code(code: Any) -> bool:
    """Whether a code object is the user's (not torch's, trainspeed's or frozen); asked once per code."""
    known = _USER_CODE.get(id(code))
    if known is None:
        name = code.co_filename
        known = _USER_CODE[id(code)] = (not name.startswith((_TORCH_DIR, _OUR_DIR, "<frozen")), code)
    return known[0]


_SITES: dict[tuple[int, int], tuple[str, Any]] = {}
"""(id of a user frame's code, instruction offset) -> ("file:line", the code), formatted once (a
frame's line number is decoded from its code's line table on every ask; its instruction offset is
at hand)."""


def site_of(frame: Any) -> str:
    """`file:line` of `frame` or, if it is torch's or trainspeed's, of the innermost user frame above it."""
    while frame is not None:
        code = frame.f_code
        if is_user_code(code):
            key = (id(code), frame.f_lasti)
            known = _SITES.get(key)
            if known is None:
                known = _SITES[key] = (f"{code.co_filename}:{frame.f_lineno}", code)
            return known[0]
        frame = frame.f_back
    return "?"


ReadCallback = Callable[[str, float, float, Any], None]
"""on_read(op, t0, t1, frame): called after each counted host read, which ran from t0 to t1
(time.perf_counter seconds) and was made by `frame` (`site_of(frame)` names the user's line; the
callback resolves it only if it needs it)."""

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


class _Depth(threading.local):
    def __init__(self) -> None:  # runs once per thread, on its first read
        self.cell = [0]
        """[nesting of wrapped reads on this thread]: a read made inside another counts once. A list,
        so that a read looks the thread-local up once, not three times."""


class _Registry:
    """The wrappers are installed once, while at least one counter is active."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: tuple[SyncCounter, ...] = ()
        self.tallying: tuple[SyncCounter, ...] = ()
        self.timed: tuple[ReadCallback, ...] = ()
        """The active counters that tally reads, and the callbacks of those that time them (tuples,
        replaced whole, so a wrapper iterating one is never disturbed by a counter entering or leaving)."""
        self.saved: dict[str, tuple[bool, Any]] = {}
        self.local = _Depth()
        self.device_only = False
        """Every active counter counts reads of accelerator tensors only: a CPU tensor's read is not a sync."""

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        # the wrapper runs on every read of a training step: one Python frame, locals bound here
        local = self.local
        reads_always = name not in ("cpu", "to")  # the others hand values to the host on every call
        getframe, clock = sys._getframe, time.perf_counter

        # (*args, **kwargs) with the tensor in args: the call below passes that tuple on as it is, where
        # (tensor, *args) would build a list and a tuple, and **kwargs a new dict, on every read
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            depth = local.cell
            if depth[0] or not (reads_always or (args and _moves_to_host(name, args[0], args[1:], kwargs))) or \
                    (self.device_only and args and args[0].device.type == "cpu"):
                depth[0] += 1
                try:
                    return original(*args, **kwargs)
                finally:
                    depth[0] -= 1
            depth[0] = 1
            t0 = clock()
            try:
                return original(*args, **kwargs) if kwargs else original(*args)
            finally:
                t1 = clock()
                depth[0] = 0
                for counter in self.tallying:
                    counter._record(name)
                for on_read in self.timed:
                    on_read(name, t0, t1, getframe(1))

        wrapper.__name__ = getattr(original, "__name__", name)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        return wrapper

    def _regroup(self) -> None:
        self.tallying = tuple(c for c in self.active if c.tally)
        self.timed = tuple(c.on_read for c in self.active if c.on_read is not None)
        self.device_only = bool(self.active) and all(c.device_only for c in self.active)

    def add(self, counter: SyncCounter) -> None:
        with self.lock:
            if not self.active:
                for name in HOST_READ_METHODS:
                    own = name in torch.Tensor.__dict__
                    original = getattr(torch.Tensor, name)
                    self.saved[name] = (own, torch.Tensor.__dict__.get(name))
                    setattr(torch.Tensor, name, self._wrap(name, original))
            self.active += (counter,)
            self._regroup()

    def remove(self, counter: SyncCounter) -> None:
        with self.lock:
            self.active = tuple(c for c in self.active if c is not counter)
            self._regroup()
            if not self.active:
                for name, (own, value) in self.saved.items():
                    if own:
                        setattr(torch.Tensor, name, value)
                    else:
                        delattr(torch.Tensor, name)
                self.saved.clear()


_REGISTRY = _Registry()
READ_CODE = _REGISTRY._wrap("item", torch.Tensor.item).__code__
"""The code of every read wrapper: a stack with a frame of it is inside a counted host read (how a
sampler on another thread tells, at no cost to the read itself)."""


class SyncCounter:
    """Context manager counting host reads of tensor values; `count` and `by_op` hold the tally."""

    def __init__(self, on_read: ReadCallback | None = None, tally: bool = True) -> None:
        self.count = 0
        self.by_op: Counter[str] = Counter()
        self.on_read = on_read
        """Called after each read with (op, t0, t1, frame); None keeps counting cheap."""
        self.tally = tally
        """False: keep no `count`/`by_op` (a caller that keeps its own, through `on_read`)."""
        self.device_only = False
        """True: count reads of accelerator tensors only (a run on a GPU, where reading a CPU tensor,
        a DataLoader sampler's `randperm(n).tolist()` say, waits for nothing)."""

    def count_device_reads_only(self) -> None:
        """From now on, reads of CPU tensors are not counted (while every active counter agrees)."""
        with _REGISTRY.lock:
            self.device_only = True
            _REGISTRY._regroup()

    def _record(self, name: str) -> None:
        # reads that count happen on the thread that made them; DataLoader workers are processes
        self.count += 1
        self.by_op[name] += 1

    def __enter__(self) -> SyncCounter:
        _REGISTRY.add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _REGISTRY.remove(self)
