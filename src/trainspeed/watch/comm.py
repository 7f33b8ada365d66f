"""DDP's gradient all-reduce, timed from DDP's own communication-hook interface.

While watching, every `DistributedDataParallel` gets a comm hook at its first forward that does
exactly what DDP's built-in reduction does - scale each gradient bucket by 1/world (the same
multiply, or division for bucket views, so the gradients are bit for bit the same) and all-reduce
the sum - and notes, per bucket, when it was handed over (its gradients were ready) and when the
reduction finished. A hook the script registers itself is wrapped with the same timing instead.

Per step that gives the communication time (the union of the bucket spans), and how much of it
was exposed: the wait after the last bucket was ready, which the host spends inside backward
until the reducer has every result. On CUDA (NCCL) the host does not wait for the all-reduce, so
the spans come from CUDA events recorded on the stream at the same two points (hand-over, result)
and read back lazily, a step at a time once all of its events have completed: no synchronisation
of ours.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class CommStep:
    """One step's all-reduces."""

    comm_s: float
    """Union of the bucket spans: time some all-reduce was in flight."""
    exposed_s: float
    """From the last bucket ready to the last all-reduce done: communication backward could not hide."""
    nbytes: int
    buckets: int


def union_s(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by at least one of the (start, end) spans."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def summarise(spans: list[tuple[float, float, int]]) -> CommStep | None:
    """(ready, done, bytes) per bucket -> the step's CommStep (None without buckets)."""
    if not spans:
        return None
    union = union_s([(ready, done) for ready, done, _ in spans])
    last_ready = max(s[0] for s in spans)
    exposed = max(0.0, max(s[1] for s in spans) - last_ready)
    return CommStep(union, exposed, sum(s[2] for s in spans), len(spans))


def _annotated(hook: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """DDP checks a comm hook's annotations against the real classes (not this module's strings)."""
    import torch.distributed as dist

    hook.__annotations__.update(state=object, bucket=dist.GradBucket, **{"return": torch.futures.Future[torch.Tensor]})
    return hook


class CommTimer:
    """Times DDP's all-reduces while installed; `take()` hands over the finished spans."""

    def __init__(self, now: Callable[[], float] = time.perf_counter) -> None:
        self.now = now
        self.spans: list[tuple[float, float, int]] = []
        self.events: list[tuple[int, Any, Any, int]] = []
        """CUDA: (step, start event, end event, bytes) per bucket, oldest first."""
        self.step = 0
        self.world_size = 1
        self.backend: str | None = None
        self.grad_bytes = 0
        self.hooked: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
        """Each DDP model made while installed -> whether a comm hook is registered on it (the script's, timed, or
        DDP's own all-reduce, which the first forward registers timed where the script registered none)."""
        self._undo: list[Callable[[], None]] = []

    # -- the hook ------------------------------------------------------------------------------
    def wrap(self, hook: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        timer = self

        def timed(state: Any, bucket: Any) -> Any:
            buffer = bucket.buffer()
            nbytes = buffer.numel() * buffer.element_size()
            if buffer.is_cuda:
                step = timer.step
                start = torch.cuda.Event(enable_timing=True)
                start.record()
                fut = hook(state, bucket)

                def done_cuda(f: Any) -> Any:
                    end = torch.cuda.Event(enable_timing=True)
                    end.record()
                    timer.events.append((step, start, end, nbytes))
                    return f.value()

                return fut.then(done_cuda)
            ready = timer.now()
            fut = hook(state, bucket)

            def done(f: Any) -> Any:
                timer.spans.append((ready, timer.now(), nbytes))  # list.append: safe from the comm thread
                return f.value()

            return fut.then(done)

        return _annotated(timed)

    def builtin(self, ddp: Any) -> Callable[[Any, Any], Any]:
        """DDP's default reduction, as a hook: bucket x (1/world) (÷ world for bucket views), all-reduce sum."""
        import torch.distributed as dist

        group = ddp.process_group
        world = dist.get_world_size(group)
        as_view = bool(getattr(ddp, "gradient_as_bucket_view", False))

        def allreduce(state: Any, bucket: Any) -> Any:
            buffer = bucket.buffer()
            if as_view:
                buffer.div_(world)
            else:
                buffer.mul_(1.0 / world)
            work = dist.all_reduce(buffer, group=group, async_op=True)
            return work.get_future().then(lambda f: f.value()[0])

        return _annotated(allreduce)

    # -- installing ----------------------------------------------------------------------------
    def install(self) -> None:
        from torch.nn.parallel import DistributedDataParallel as DDP

        timer = self
        original_init = DDP.__init__
        original_register = DDP.register_comm_hook

        def init(ddp: Any, *args: Any, **kwargs: Any) -> None:
            original_init(ddp, *args, **kwargs)
            import torch.distributed as dist

            timer.world_size = dist.get_world_size(ddp.process_group)
            timer.backend = str(dist.get_backend(ddp.process_group))
            timer.grad_bytes = sum(p.numel() * p.element_size() for p in ddp.module.parameters() if p.requires_grad)
            timer.hooked[ddp] = False

            def first_forward(module: Any, args: Any) -> None:
                handle.remove()
                if not timer.hooked.get(module):  # the script registered no hook of its own
                    timer.hooked[module] = True
                    original_register(module, None, timer.wrap(timer.builtin(module)))

            handle = ddp.register_forward_pre_hook(first_forward)

        def register(ddp: Any, state: Any, hook: Callable[..., Any]) -> Any:
            timer.hooked[ddp] = True
            return original_register(ddp, state, timer.wrap(hook))

        DDP.__init__ = init  # type: ignore[method-assign, assignment]
        DDP.register_comm_hook = register  # type: ignore[method-assign, assignment]

        def undo() -> None:
            DDP.__init__ = original_init  # type: ignore[method-assign]
            DDP.register_comm_hook = original_register  # type: ignore[method-assign]

        self._undo.append(undo)

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    # -- reading ---------------------------------------------------------------------------------
    def take(self) -> CommStep | None:
        """The spans finished since the last call (host clock), as one step's CommStep."""
        if not self.spans:
            return None
        spans, self.spans = self.spans, []
        return summarise(spans)

    def end_step(self) -> None:
        self.step += 1

    def take_device(self) -> list[CommStep]:
        """CUDA: the CommStep of every ended step whose all-reduces have all completed on the device,
        from the events' elapsed times (relative to the step's first hand-over)."""
        steps: list[CommStep] = []
        while self.events and self.events[0][0] < self.step:
            index = self.events[0][0]
            mine = [e for e in self.events if e[0] == index]
            if not all(end.query() for _, _, end, _ in mine):
                break
            del self.events[:len(mine)]
            ref = mine[0][1]
            spans = [(ref.elapsed_time(start) / 1e3, ref.elapsed_time(end) / 1e3, n) for _, start, end, n in mine]
            step = summarise(spans)
            if step is not None:
                steps.append(step)
        return steps
