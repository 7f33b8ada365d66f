"""Count host reads of tensor values as they happen: those of device tensors (each a synchronisation) apart from
those of CPU tensors (none waits for anything).

`loss.item()`, `float(loss)`, `f"{loss:.4f}"`, `print(loss)`, `t.tolist()`, `t.numpy()`, a
`.cpu()` of a device tensor, `if t:` ... of a tensor on a GPU all make the host wait for the device's
queue to drain. The same reads of a CPU tensor (a whole run on the CPU; indices from `torch.randint`
slicing a numpy array) wait for nothing: they are tallied as host reads, with their `host` flag set.
While a `SyncCounter` is active, the `torch.Tensor` methods behind those reads are wrapped
with a counter; the wrapped call is the original one, so values are untouched. A read made
from inside another (`__format__` calls `item()`) counts once.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

from trainspeed.watch.lines import frame_site

_TORCH_DIR = os.path.dirname(torch.__file__)
_OUR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OURS = (_TORCH_DIR, _OUR_DIR, "<frozen")
"""torch's, trainspeed's and frozen modules' files: never the user's, and never a read's place."""
_LIBRARY_DIRS = tuple(sorted({os.path.join(path, "") for key, path in sysconfig.get_paths().items()
                              if key in ("stdlib", "platstdlib", "purelib", "platlib")}))
"""The standard library's and installed packages' folders: a read made in them (numpy's memmap indexing with a
0-d tensor calls its `__index__`) is charged to the user's line that called them."""


_USER_CODE: dict[int, tuple[bool, Any]] = {}
"""id(code) -> (is it the user's?, the code, kept alive so that its id is not reused while here).
Keyed by id: hashing a code object hashes its constants and names every time, recursively through
every function it defines (a microsecond for a small script's module code, tens for a large one)."""


def _library(name: str) -> bool:
    return name.startswith(_OURS) or name.startswith(_LIBRARY_DIRS) \
        or f"{os.sep}site-packages{os.sep}" in name or f"{os.sep}dist-packages{os.sep}" in name


def is_user_code(code: Any) -> bool:
    """Whether a code object is the user's: not torch's, trainspeed's, frozen, the standard library's or an
    installed package's; asked once per code."""
    known = _USER_CODE.get(id(code))
    if known is None:
        known = _USER_CODE[id(code)] = (not _library(code.co_filename), code)
    return known[0]


def _optimizer_value_code() -> Any:
    try:
        from torch.optim.optimizer import _get_value
    except ImportError:  # a torch without it: its optimizers' reads are counted like any other
        return None
    return getattr(_get_value, "__code__", None)


_OPTIMIZER_VALUE = _optimizer_value_code()
"""The code of torch.optim's `_get_value(x)`, which Adam, AdamW, Adamax, Adagrad, NAdam, RAdam and ASGD call on every
step, for every parameter, to read their step counters (and NAdam its `mu_product`, ASGD its `eta`) with
`.item()`. Without capturable=True or fused=True, torch keeps the counters on the host whatever the parameters'
device ("special device hosting for step", torch/optim/adam.py): reading them is no synchronisation on any device,
and on a CPU run they were counted as the user's `optimizer.step()` line's host reads, one per parameter tensor.
So a read it makes of a CPU tensor is not counted. ASGD keeps `eta` on the parameters' device: on a GPU its reads
still count, on a CPU run they are left out with the rest."""


_SITES: dict[tuple[int, int], tuple[str, Any]] = {}
"""(id of a user frame's code, instruction offset) -> ("file:line", the code), formatted once (a
frame's line number is decoded from its code's line table on every ask; its instruction offset is
at hand)."""


def site_of(frame: Any) -> str:
    """`file:line` of `frame` or, if it is a library's (torch, trainspeed, the standard library, an installed
    package), of the innermost user frame above it; where none is on the stack, the innermost frame that is
    neither torch's nor trainspeed's."""
    fallback = "?"
    while frame is not None:
        code = frame.f_code
        if is_user_code(code):
            key = (id(code), frame.f_lasti)
            known = _SITES.get(key)
            if known is None:
                known = _SITES[key] = (frame_site(frame), code)
            return known[0]
        if fallback == "?" and not code.co_filename.startswith(_OURS):
            fallback = frame_site(frame)
        frame = frame.f_back
    return fallback


ReadCallback = Callable[[str, float, float, Any, bool], None]
"""on_read(op, t0, t1, frame, host): called after each counted read, which ran from t0 to t1
(time.perf_counter seconds) and was made by `frame` (`site_of(frame)` names the user's line); `host`:
it read a CPU tensor (no synchronisation)."""

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


PLAIN_READS = frozenset({"item", "tolist", "__float__", "__int__", "__bool__", "__index__", "__complex__"})
"""Methods that take no argument but the tensor: their wrapper has a fixed signature, which CPython calls
without building an argument tuple and dict (the others' wrappers take *args, **kwargs)."""

_NO_ARG = object()


class _Registry:
    """The wrappers are installed once, while at least one counter is active. Every counted read goes
    into one table, `tally`, by the place that made it; each counter reads its own share as the
    difference from the table as it stood when the counter started (so a read costs one table update
    however many counters are active)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: tuple[SyncCounter, ...] = ()
        self.timed: tuple[ReadCallback, ...] = ()
        """The callbacks of the active counters that have one (a tuple, replaced whole, so a wrapper
        iterating it is never disturbed by a counter entering or leaving)."""
        self.tally: dict[tuple[Any, ...], list[Any]] = {}
        """[reads, seconds, "file:line", op, code, host] per place that read, apart for reads of CPU tensors
        (host True) and of device tensors. Keyed (id of the code, instruction offset, op, host) for reads made from the user's own code (no site to work out, no code object to hash
        on the hot path; the entry keeps the code alive, so that its id is not reused); keyed
        ("file:line", op, host), with code None, for reads made inside torch (or ours), by the user's line
        above them, worked out on every such read, since the same torch line is reached from many
        places. Emptied (never replaced: the wrappers hold it) when the last counter leaves."""
        self.saved: dict[str, tuple[bool, Any]] = {}
        self.busy = [0]
        """[counted reads under way, on every thread]. A read made inside another (`__format__` calls `item()`)
        counts once: while this is 0, no read can be, and a read asks nothing more; otherwise it looks up its
        own thread's stack for a wrapper's frame (`_inside_read`). One list, where a count per thread would
        cost every read a thread lookup. Its `+= 1` and `-= 1` are not atomic across threads, but no thread
        switch falls inside either under the GIL (CPython switches at calls and loop jumps)."""
        self.lasts: list[list[Any]] = []
        """Each wrapper's [code, instruction offset, tally entry] of the last read it counted from the user's
        code (a loop's `loss.item()`, read from the same place every step, finds its entry without a key)."""
        self.device_only = False
        """Every active counter counts reads of accelerator tensors only: a CPU tensor's read is not a sync."""

    def entry(self, frame: Any, op: str, host: bool) -> list[Any]:
        """The tally of the place that made a read (`frame`), made on first sight (the wrappers look a
        user's place up themselves first, and come here when it is new or inside torch)."""
        code = frame.f_code
        if is_user_code(code):
            key = (id(code), frame.f_lasti, op, host)
            found = self.tally.get(key)
            if found is None:  # its line worked out once, not on every read
                found = self.tally[key] = [0, 0.0, site_of(frame), op, code, host]
            return found
        where = site_of(frame)
        return self.tally.setdefault((where, op, host), [0, 0.0, where, op, None, host])

    def _counted(self, op: str, t0: float, t1: float, frame: Any, last: list[Any], host: bool) -> None:
        """Count a read (of a CPU tensor: `host`) that `frame` made from t0 to t1 (a wrapper whose `last`
        entry is not that place's)."""
        code, lasti = frame.f_code, frame.f_lasti
        if code is last[0] and lasti == last[1] and last[2][5] is host:
            entry = last[2]
        else:
            entry = self.tally.get((id(code), lasti, op, host))
            if entry is None:  # first sight, or a read made inside torch: its user's line varies, no caching
                entry = self.entry(frame, op, host)
            else:
                last[0], last[1], last[2] = code, lasti, entry
        entry[0] += 1
        entry[1] += t1 - t0
        for on_read in self.timed:
            on_read(op, t0, t1, frame, host)

    def _new_last(self) -> list[Any]:
        last: list[Any] = [None, -1, None]
        self.lasts.append(last)
        return last

    def _wrap_plain(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        # the wrapper of `loss.item()`, run on every step between the user's torch work, where what it touches has
        # gone cold: a fixed signature and no per-thread nesting cost microseconds a read less than a *args,
        # **kwargs wrapper with a thread-local nesting count (BENCHMARKS.md, "Where the code's constants come from")
        busy, clock, getframe = self.busy, time.perf_counter, sys._getframe
        last = self._new_last()

        def read(tensor: Any, arg: Any = _NO_ARG) -> Any:
            if arg is not _NO_ARG:  # a wrong call: torch's own error
                return original(tensor, arg)
            if busy[0] and _inside_read(getframe(1)) or self.device_only and tensor.device.type == "cpu" or \
                    getframe(1).f_code is _OPTIMIZER_VALUE and tensor.is_cpu:
                # (the last: an optimizer's step counter, `_OPTIMIZER_VALUE`, read once per parameter a step: not
                # counted, its seconds stay in the phase around it, the optimizer's)
                return original(tensor)
            busy[0] += 1
            t0 = clock()
            try:
                return original(tensor)
            finally:
                t1 = clock()
                busy[0] -= 1
                frame = getframe(1)
                host = tensor.is_cpu
                if frame.f_code is last[0] and frame.f_lasti == last[1] and last[2][5] is host:  # _counted, inlined
                    entry = last[2]
                    entry[0] += 1
                    entry[1] += t1 - t0
                    for on_read in self.timed:
                        on_read(name, t0, t1, frame, host)
                else:
                    self._counted(name, t0, t1, frame, last, host)

        return _named(read, name, original)

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        busy, clock, getframe = self.busy, time.perf_counter, sys._getframe
        reads_always = name not in ("cpu", "to")  # the others hand values to the host on every call
        last = self._new_last()

        # (*args, **kwargs) with the tensor in args: the call below passes that tuple on as it is, where
        # (tensor, *args) would build a list and a tuple, and **kwargs a new dict, on every read
        def read_any(*args: Any, **kwargs: Any) -> Any:
            if busy[0] and _inside_read(getframe(1)) or \
                    not (reads_always or (args and _moves_to_host(name, args[0], args[1:], kwargs))) or \
                    (self.device_only and args and args[0].device.type == "cpu"):
                return original(*args, **kwargs)
            busy[0] += 1
            t0 = clock()
            try:
                return original(*args, **kwargs) if kwargs else original(*args)
            finally:
                t1 = clock()
                busy[0] -= 1
                self._counted(name, t0, t1, getframe(1), last, bool(args) and getattr(args[0], "is_cpu", False) is True)

        return _named(read_any, name, original)

    def record(self, op: str, t0: float, t1: float, frame: Any) -> None:
        """A host read that ran from t0 to t1, made by `frame`, seen by someone else (a wrapped
        `torch.cuda.synchronize`): counted as the wrappers count theirs."""
        entry = self.entry(frame, op, False)
        entry[0] += 1
        entry[1] += t1 - t0
        for on_read in self.timed:
            on_read(op, t0, t1, frame, False)

    def _regroup(self) -> None:
        active = self.active
        if len(active) == 1:  # the usual case, at every quiet run's start and end: no generator frames
            counter = active[0]
            self.timed = () if counter.on_read is None else (counter.on_read,)
            self.device_only = counter.device_only
            return
        self.timed = tuple(c.on_read for c in active if c.on_read is not None)
        self.device_only = bool(active) and all(c.device_only for c in active)

    def add(self, counter: SyncCounter) -> dict[tuple[Any, ...], tuple[int, float]]:
        """Activate `counter`; returns the table as it stands (what it must not count)."""
        with self.lock:
            if not self.active:
                self.busy[0] = 0
                for name in HOST_READ_METHODS:
                    own = name in torch.Tensor.__dict__
                    original = getattr(torch.Tensor, name)
                    self.saved[name] = (own, torch.Tensor.__dict__.get(name))
                    wrap = self._wrap_plain if name in PLAIN_READS else self._wrap
                    setattr(torch.Tensor, name, wrap(name, original))
            self.active += (counter,)
            self._regroup()
            return {key: (e[0], e[1]) for key, e in self.tally.items()}

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
                self.tally.clear()
                for last in self.lasts:  # a wrapper someone kept a reference to counts into the tally again
                    last[0], last[1], last[2] = None, -1, None
                self.lasts.clear()


def _named(wrapper: Callable[..., Any], name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """`wrapper` with the original's name (else `name`) and docstring, and `__wrapped__` it (functools' way)."""
    functools.update_wrapper(wrapper, original, assigned=("__doc__",), updated=())
    setattr(wrapper, "__name__", getattr(original, "__name__", name))  # noqa: B010 (a wrapper's own name)
    return wrapper


_REGISTRY = _Registry()
READ_CODES = (_REGISTRY._wrap_plain("item", torch.Tensor.item).__code__,
              _REGISTRY._wrap("cpu", torch.Tensor.cpu).__code__)
"""The codes of the read wrappers: a stack with a frame of one is inside a wrapped read (how a read tells it
is made inside another, and how a sampler on another thread tells, at no cost to the read itself)."""
_REGISTRY.lasts.clear()  # those wrappers are never installed


def _inside_read(frame: Any) -> bool:
    """Whether `frame` or a frame above it is a read wrapper's (on a stack, a read under way)."""
    plain, any_args = READ_CODES
    while frame is not None:
        code = frame.f_code
        if code is plain or code is any_args:
            return True
        frame = frame.f_back
    return False


def reading() -> bool:
    """Whether this thread is inside a counted host read now."""
    return _REGISTRY.busy[0] > 0 and _inside_read(sys._getframe(1))


class SyncCounter:
    """Context manager counting host reads of tensor values: `count`, `by_op` and `sites()` hold the tally."""

    def __init__(self, on_read: ReadCallback | None = None) -> None:
        self.on_read = on_read
        """Called after each read with (op, t0, t1, frame); None (the default) keeps a read cheap.
        `time_reads()` changes it while the counter is active."""
        self.device_only = False
        """True: count reads of accelerator tensors only (a run on a GPU, where reading a CPU tensor,
        a DataLoader sampler's `randperm(n).tolist()` say, waits for nothing)."""
        self._before: dict[tuple[Any, ...], tuple[int, float]] = {}
        self._final: list[tuple[str, str, int, float, bool]] | None = None
        self._active = False

    def count_device_reads_only(self) -> None:
        """From now on, reads of CPU tensors are not counted (while every active counter agrees)."""
        with _REGISTRY.lock:
            self.device_only = True
            _REGISTRY._regroup()

    def time_reads(self, on_read: ReadCallback | None) -> float:
        """Call `on_read` after each read from now on (None: no call; the reads are still counted). Returns the
        seconds of every read of a device tensor (every synchronisation) tallied so far, by any counter: the
        difference of two calls is the seconds they took between them."""
        with _REGISTRY.lock:
            self.on_read = on_read
            _REGISTRY._regroup()
            return sum(e[1] for e in _REGISTRY.tally.values() if not e[5])

    @staticmethod
    def record(op: str, t0: float, t1: float, frame: Any) -> None:
        """Count a host read that some other wrapper saw (a `torch.cuda.synchronize`), for every
        active counter."""
        _REGISTRY.record(op, t0, t1, frame)

    def freeze(self) -> None:
        """Count nothing more (the tally as it stands now is the counter's), the wrappers left in until it leaves."""
        if self._active and self._final is None:
            self._final = self.sites()

    def count_from_now(self) -> None:
        """Count from now on, as if the counter started now (the reads so far left out)."""
        if self._active:
            with _REGISTRY.lock:
                self._before = {key: (e[0], e[1]) for key, e in _REGISTRY.tally.items()}

    def sites(self) -> list[tuple[str, str, int, float, bool]]:
        """("file:line", op, reads, seconds, host) of each place that read since the counter started (one
        line may appear more than once: one entry per instruction that read; `host`: its reads are of CPU
        tensors)."""
        if self._final is not None:
            return list(self._final)
        if not self._active:
            return []
        before = self._before
        out = []
        for key, (n, seconds, where, op, _, host) in list(_REGISTRY.tally.items()):
            n0, s0 = before.get(key, (0, 0.0))
            if n > n0:
                out.append((where, op, n - n0, seconds - s0, host))
        return out

    def seconds(self) -> float:
        """Seconds of every host read counted so far (of CPU and device tensors)."""
        return sum(site[3] for site in self.sites())

    @property
    def count(self) -> int:
        """Host reads counted so far (of CPU and device tensors)."""
        return sum(site[2] for site in self.sites())

    @property
    def by_op(self) -> Counter[str]:
        ops: Counter[str] = Counter()
        for _, op, n, _, _ in self.sites():
            ops[op] += n
        return ops

    def __enter__(self) -> SyncCounter:
        self._final = None
        self._before = _REGISTRY.add(self)
        self._active = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._active:
            self._final = self.sites()
            self._active = False
            _REGISTRY.remove(self)
