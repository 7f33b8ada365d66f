"""Sharded training's collectives (FSDP2's all-gathers and reduce-scatters), timed where torch.distributed issues them.

While watching, `torch.distributed`'s tensor collectives that FSDP2 calls (`all_gather_into_tensor`,
`all_gather_single`, `reduce_scatter_tensor`, `reduce_scatter_single`; FSDP2 looks them up on the module at each call)
are wrapped: each call is timed on the host and opened as the `comm` phase for as long as the host is blocked in it, so
that the phase table's `comm` is the communication the step waited for (exposed) and forward and backward keep their
own compute. A call made with `async_op=True` returns at once; the wait for it (`Work.wait()`, where FSDP2 copies the
gathered parameters out) is the exposed part, and the completion (the work's future) ends its time in flight. What was
in flight while the host computed is the overlapped part.

Each call is also told whether autograd's engine was running (`torch._C._current_graph_task_id()`): an all-gather in
backward re-gathers what forward resharded (`reshard_after_forward=True`).

On CUDA (NCCL) the host does not wait for a collective, so host spans would time the launch: calls on CUDA tensors are
passed through untimed, and the run says so in a note.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from trainspeed.watch.comm import union_s

KINDS = {"all_gather_into_tensor": "all_gather", "all_gather_single": "all_gather",
         "reduce_scatter_tensor": "reduce_scatter", "reduce_scatter_single": "reduce_scatter"}
"""torch.distributed's function -> the kind of collective it is."""


@dataclass
class Call:
    """One collective, on the host clock."""

    kind: str
    backward: bool
    """Issued while autograd's engine ran (a pre-backward all-gather, a post-backward reduce-scatter)."""
    nbytes: int
    """The unsharded buffer's bytes (the all-gather's output, the reduce-scatter's input)."""
    issued: float
    done: float
    """When the collective completed (sync: the call returned; async: the work's future)."""
    waited_s: float
    """Host time blocked in the call and in its wait: the exposed part."""

    def finished(self, at: float) -> None:
        """The collective completed by `at` (its future's callback, on the backend's thread: float stores)."""
        self.done = max(self.done, at)

    def waited(self, t0: float, t1: float) -> None:
        """The host waited on it from t0 to t1 (`Work.wait`)."""
        self.waited_s += t1 - t0
        self.done = max(self.done, t1)


class _Inside(threading.local):
    """Whether this thread is inside a timed collective (or an untimed block): the collectives it calls are not
    timed again."""

    on = False

    def set(self, on: bool) -> None:
        self.on = on


@dataclass(frozen=True)
class KindStep:
    """One step's collectives of one kind."""

    calls: int
    nbytes: int
    comm_s: float
    """Union of the calls' spans: time some collective of this kind was in flight."""
    exposed_s: float
    backward_calls: int
    backward_exposed_s: float


def summarise(calls: list[Call]) -> dict[str, KindStep]:
    """A step's calls -> per kind, what it took."""
    out: dict[str, KindStep] = {}
    for kind in sorted({c.kind for c in calls}):
        mine = [c for c in calls if c.kind == kind]
        back = [c for c in mine if c.backward]
        out[kind] = KindStep(len(mine), sum(c.nbytes for c in mine), union_s([(c.issued, c.done) for c in mine]),
                             sum(c.waited_s for c in mine), len(back), sum(c.waited_s for c in back))
    return out


class CollectiveTimer:
    """Times the collectives FSDP2 issues while installed; `take()` hands over the calls finished since the last."""

    def __init__(self, enter: Callable[[str], None], exit_: Callable[[str], None],
                 now: Callable[[], float] = time.perf_counter) -> None:
        self.enter, self.exit = enter, exit_
        self.now = now
        self.calls: list[Call] = []
        self.world_size = 1
        self.backend: str | None = None
        self.cuda_untimed = 0
        """Collectives on CUDA tensors passed through untimed."""
        self._pending: dict[int, tuple[Any, Call]] = {}
        """Async works issued and not yet waited for: id(work) -> (work, its call)."""
        self.waited_s = 0.0
        """The host's waits for collectives so far, in all."""
        self.used = False
        """A collective was timed: the run is sharded, and its steps are never passed over (quiet)."""
        self._inside = _Inside()
        self._undo: list[Callable[[], None]] = []

    def install(self) -> None:
        try:
            import torch.distributed as dist
        except ImportError:
            return
        if not dist.is_available():
            return
        for name, kind in KINDS.items():
            original = getattr(dist, name, None)
            if original is None:
                continue
            setattr(dist, name, self._wrap(original, kind))
            self._undo.append(functools.partial(setattr, dist, name, original))
        work_cls = dist.distributed_c10d.Work
        original_wait = work_cls.wait
        setattr(work_cls, "wait", self._wrap_wait(original_wait))  # noqa: B010 (a patch of torch's class, undone below)
        self._undo.append(functools.partial(setattr, work_cls, "wait", original_wait))

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def _wrap(self, original: Callable[..., Any], kind: str) -> Callable[..., Any]:
        timer = self

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            tensors = [a for a in (*args[:2], kwargs.get("output"), kwargs.get("input"), kwargs.get("output_tensor"),
                                   kwargs.get("input_tensor")) if isinstance(a, torch.Tensor)]
            if not tensors or timer._inside.on:
                return original(*args, **kwargs)
            if tensors[0].device.type != "cpu":
                timer.cuda_untimed += 1
                return original(*args, **kwargs)
            timer.used = True
            nbytes = max(t.numel() * t.element_size() for t in tensors)
            backward = torch._C._current_graph_task_id() != -1
            timer._inside.set(True)
            timer.enter("comm")
            issued = timer.now()
            try:
                work = original(*args, **kwargs)
            finally:
                returned = timer.now()
                timer.exit("comm")
                timer._inside.set(False)
            call = Call(kind, backward, nbytes, issued, returned, returned - issued)
            timer.waited_s += returned - issued
            if work is not None and hasattr(work, "get_future"):  # async_op: done when its future is
                timer._pending[id(work)] = (work, call)
                try:
                    work.get_future().then(functools.partial(timer._finished, call))
                except (RuntimeError, ValueError):  # a backend without futures (or a coalesced call): done when waited
                    pass
            else:
                timer.calls.append(call)
            return work

        return wrapper

    def _finished(self, call: Call, future: Any) -> None:
        call.finished(self.now())

    def _wrap_wait(self, original: Callable[..., Any]) -> Callable[..., Any]:
        timer = self

        @functools.wraps(original)
        def wait(work: Any, *args: Any, **kwargs: Any) -> Any:
            entry = timer._pending.pop(id(work), None) if timer._pending else None
            if entry is None or entry[0] is not work:
                return original(work, *args, **kwargs)
            call = entry[1]
            timer.enter("comm")
            t0 = timer.now()
            try:
                return original(work, *args, **kwargs)
            finally:
                t1 = timer.now()
                timer.exit("comm")
                call.waited(t0, t1)
                timer.waited_s += t1 - t0
                timer.calls.append(call)

        return wait

    @contextlib.contextmanager
    def untimed(self) -> Iterator[None]:
        """A block whose collectives are not the run's (the probe's): passed through."""
        self._inside.set(True)
        try:
            yield
        finally:
            self._inside.set(False)

    def take(self) -> list[Call]:
        """The calls finished (and waited for) since the last call, oldest first."""
        calls, self.calls = self.calls, []
        return calls

    def configure(self) -> None:
        """The process group's size and backend, once a collective has run."""
        try:
            import torch.distributed as dist

            if dist.is_initialized():
                self.world_size = dist.get_world_size()
                self.backend = str(dist.get_backend())
        except (ImportError, RuntimeError, ValueError):
            pass
