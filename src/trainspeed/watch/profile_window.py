"""A few steps counted op by op: aten ops, FLOPs and (on CUDA) kernels per step, left out of the timings.

On CUDA the window also gives the GPU's busy time per step: how long some kernel, copy or memset
ran (CUPTI's timestamps, overlaps counted once). That is the GPU's own work. CUDA events at the
phase edges cannot give it: an event pair spans the time between two points of the stream, and
that span includes the gaps where the GPU waits for the host to launch the next kernel.

On CUDA the window is torch.profiler (kernels need CUPTI). On the CPU it is one dispatch mode, an
op counter that also counts FLOPs with torch's own formulas: torch.profiler's first start in a process
costs about a second here (Kineto's initialisation), a large share of a short CPU job, while the mode
costs nothing until it is entered. FlopCounterMode itself is not used: its module tracker hooks every
module call's inputs that require grad, and `torch.autograd.grad` over such a leaf input (a WGAN-GP's
gradient penalty on `mix.requires_grad_()`) then raised "A leaf node was passed to
_will_engine_execute_node ..." in the user's script (torch 2.13); and a second mode stacked on the
counter sent each op through Python twice. The mode sees the ops that reach the dispatcher after autograd
and after composite ops are decomposed (nn.Linear: t + addmm), each counted once.

On both, the window also counts and times the ops dispatched outside every phase the watcher
names (`outside()`): a loss computed with torch.nn.functional, a metric, indexing a batch out of a
tensor. Their host time is what torch itself accounts for in the step's "other" time; the rest of
"other" is the script's own host code (rules.host_code_heavy).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from trainspeed._io import quiet_fd2
from trainspeed.watch.result import OpTime, Window
from trainspeed.watch.run_queue import ThreadWait, threads_wait
from trainspeed.watch.trace import WindowOp

OP_TIMES_KEPT = 12
"""The op table keeps the ops with most host time, and every op that carries arithmetic."""


def _dtype_of(args: Any) -> torch.dtype | None:
    """The dtype of an op's first tensor argument (or of the first tensor in its first list of them)."""
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.dtype
        if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
            return a[0].dtype
    return None


class OpCounter(TorchDispatchMode):
    """Counts the ops dispatched while it is active (the ops run unchanged); with `outside`, also counts
    and times (host clock, no synchronisation) those dispatched while `outside()` is true; with
    `by_op`, times every op, by op and dtype (`by_op`). The profiler's own ops (the record_function
    ranges torch opens around every optimizer step) are no work, and not counted."""

    supports_higher_order_operators = True
    """torch.cond, flex_attention and the other higher-order ops run eagerly under the window: a mode without it made
    torch raise "There was no rule registered for HigherOrderOperator cond" in the user's script."""

    def __init__(self, outside: Callable[[], bool] | None = None, by_op: bool = False,
                 edge: Callable[[], bool] | None = None, waited: Callable[[], float] | None = None,
                 flops: bool = False) -> None:
        super().__init__()
        self.flop_counts: dict[Any, int] | None = Counter() if flops else None
        """With `flops`: FLOPs by op (overload packet), by torch's own formulas (torch.utils.flop_counter's
        registry), counted as FlopCounterMode counts them, an op with a composite form run as its parts. One mode
        instead of FlopCounterMode stacked on this one: each op passes through Python once (a window's step of 1 439
        small ops took 13 times its time with both, 4.5 times with this one, 2026-11-28)."""
        self.waited = waited
        """The training thread's and torch's intra-op threads' run-queue wait (seconds since its last call): an op's
        time is its wall time less the time its threads waited for a core (on a machine shared with busy processes
        an op that lost its core for a scheduler slice took milliseconds, and looked like work)."""
        self.ops = 0
        self.outside = outside
        self.edge = edge
        self.edge_ops = 0
        """Ops dispatched while `edge()` is true (not outside): a DataLoader's, a copy's, a host read's."""
        self.outside_ops = 0
        self.outside_s = 0.0
        """Host seconds of the ops dispatched outside: below the dispatch mode, so without this mode's
        own Python, and on CUDA their launch, not the kernel."""
        self.by_op: dict[tuple[Any, torch.dtype | None], list[Any]] | None = {} if by_op else None
        """This step's ops: (op overload packet, dtype) -> [calls, host seconds]; None when not asked for."""
        self.steps_by_op: list[dict[tuple[Any, torch.dtype | None], list[Any]]] = []
        """`by_op` of each step ended (`end_step`), in order."""
        self.outside_steps: list[tuple[int, float]] = []
        """(ops, host seconds) dispatched outside in each step ended."""
        self._outside_mark = (0, 0.0)

    def end_step(self) -> None:
        """A step ended: keep its figures apart from the next one's."""
        if self.by_op is not None:
            self.steps_by_op.append(self.by_op)
            self.by_op = {}
        ops, seconds = self._outside_mark
        self.outside_steps.append((self.outside_ops - ops, self.outside_s - seconds))
        self._outside_mark = (self.outside_ops, self.outside_s)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if getattr(func, "namespace", None) == "profiler":
            return func(*args, **kwargs)
        if isinstance(func, torch._ops.HigherOrderOperator):  # torch.cond, flex_attention run eagerly: one op, run
            self.ops += 1  # as it is, its inside uncounted (without this a mode raises in the user's script)
            return func(*args, **kwargs)
        counts = self.flop_counts
        if counts is not None and _decomposes(func):
            with self:
                out = func.decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
        self.ops += 1
        outside = self.outside is not None and self.outside()
        if not outside and self.edge is not None and self.edge():
            self.edge_ops += 1
        if not outside and self.by_op is None:
            out = func(*args, **kwargs)
        else:
            out = self._timed(func, args, kwargs, outside)
        if counts is not None and (formula := flop_registry.get(func.overloadpacket)) is not None:
            counts[func.overloadpacket] += formula(*args, **kwargs, out_val=out)
        return out

    def _timed(self, func: Any, args: Any, kwargs: dict[str, Any], outside: bool) -> Any:
        """Run `func`, its time (less its threads' wait for a core) counted outside or by op."""
        waited = self.waited
        if waited is not None:
            waited()  # from here
        t0 = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            took = time.perf_counter() - t0
            if waited is not None:
                took = max(0.0, took - waited())
            if outside:
                self.outside_s += took
                self.outside_ops += 1
            if self.by_op is not None:
                key = (func.overloadpacket, _dtype_of(args))
                entry = self.by_op.get(key)
                if entry is None:
                    entry = self.by_op[key] = [0, 0.0]
                entry[0] += 1
                entry[1] += took

    @property
    def total_flops(self) -> int:
        return sum(self.flop_counts.values()) if self.flop_counts is not None else 0


_DECOMPOSES: dict[Any, bool] = {}


def _decomposes(func: Any) -> bool:
    """Whether `func` has a composite form (CompositeImplicitAutograd) to run as its parts, as FlopCounterMode runs
    it: asked once per op."""
    known = _DECOMPOSES.get(func)
    if known is None:
        key = torch._C.DispatchKey.CompositeImplicitAutograd
        try:
            known = key in func.py_kernels or torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), key)
        except (AttributeError, RuntimeError):
            known = False
        _DECOMPOSES[func] = known
    return known


def least_per_call(steps: list[tuple[int, float]]) -> float:
    """The least of the steps' mean seconds per call, given each step's (calls, seconds); 0 when none.

    The window's host times are the truth of a few steps only, and a stall adds to them and never
    takes away: the VM losing its core for a scheduler tick (4 ms on the 2-vCPU VM, where a 40 us op
    then took 4 ms), an intra-op thread waited for. Such stalls made the seed's single log_softmax call
    a step look like 7 ms of work (2026-11-23, the seed loop beside two busy processes), and the demo
    named compute_bound. An op's work does not change from step to step; its least
    per-call time over the window's steps is its time with no stall in it, unless every step stalled.
    Per call, not per step: an op may run more often in one step than in the next. Each call's time between the
    bounds of its threads' waits, as the phases take theirs (`wait_bounds`), was tried and not kept: beside two
    busy processes the seed's log_softmax backward, stalled in the window's steps, came to 0.36 ms a call against
    40 us, and the demo was named compute_bound (2026-11-28). Nor the longest one thread's wait for the ops with a
    FLOP formula: `float64_numpy.py`'s float64 products came to 9.8 and 26.9 ms a step against 3.4 alone (the sum
    gives 1.0 to 1.8; beside busy processes `slow_dtype` takes such products at their FLOPs over the dtype's rate)."""
    return min((seconds / calls for calls, seconds in steps if calls > 0), default=0.0)


def op_rows(steps_by_op: list[dict[tuple[Any, torch.dtype | None], list[Any]]],
            flop_counts: dict[Any, float]) -> list[OpTime]:
    """Every op of the window by op and dtype, per step, most host time first. An op's calls are its mean
    per step; its time is those calls at its least per-call time of a step (`least_per_call`). An op's
    FLOPs are given where it ran in one dtype only (FlopCounterMode counts by op, not dtype)."""
    flops = {str(op): n for op, n in flop_counts.items()}
    keys = list(dict.fromkeys(key for table in steps_by_op for key in table))
    dtypes = Counter(str(op) for op, _ in keys)
    n = len(steps_by_op)
    rows = []
    for op, dtype in keys:
        per_step = [tuple(table.get((op, dtype), (0, 0.0))) for table in steps_by_op]
        calls = sum(c for c, _ in per_step) / n
        name = str(op)
        arithmetic = name in flops
        rows.append(OpTime(op=name, dtype=str(dtype).removeprefix("torch.") if dtype is not None else None,
                           calls=calls, ms=calls * least_per_call(per_step) * 1e3, arithmetic=arithmetic,
                           flops=flops[name] / n if arithmetic and dtypes[name] == 1 else None))
    rows.sort(key=lambda row: row.ms, reverse=True)
    return rows


def op_table(rows: list[OpTime], keep: int = OP_TIMES_KEPT) -> list[OpTime]:
    """Of `op_rows`: the `keep` slowest ops, and every op torch has a FLOP formula for."""
    return [row for i, row in enumerate(rows) if i < keep or row.arithmetic]


def _is_annotation(e: Any) -> bool:
    ask = getattr(e, "is_user_annotation", None)  # torch >= 2.4
    return bool(ask()) if ask is not None else e.name().startswith("ProfilerStep")


def busy_ns(intervals: list[tuple[int, int]]) -> int:
    """Length of the union of [start, end) intervals: time during which at least one of them ran."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def count_ops_and_kernels(prof: Any) -> tuple[int, int, int]:
    """(aten ops called from outside any other aten op, GPU kernels, GPU busy ns) in a finished profile.

    GPU busy ns: the union of every kernel's, copy's and memset's time on the device (user
    annotations that torch.profiler also puts on the GPU's timeline are not work, and left out).
    """
    from torch._C._profiler import _EventType

    ops = kernels = 0
    stack = [(ev, False) for ev in prof.profiler.kineto_results.experimental_event_tree()]
    while stack:
        ev, inside_aten = stack.pop()
        is_aten = ev.tag == _EventType.TorchOp and ev.name.startswith("aten::")
        if is_aten and not inside_aten:
            ops += 1
        stack.extend((c, inside_aten or is_aten) for c in ev.children)
    work: list[tuple[int, int]] = []
    for e in prof.profiler.kineto_results.events():
        if e.device_type() != torch.autograd.DeviceType.CUDA or _is_annotation(e):
            continue
        work.append((e.start_ns(), e.end_ns()))
        if not e.name().startswith(("Memcpy", "Memset")):
            kernels += 1
    return ops, kernels, busy_ns(work)


def outer_flops(events: Any) -> float:
    """FLOPs of torch.profiler's events that have a formula, less those nested in an event that has one:
    an op dispatched through a dispatch mode under the profiler (the window's op counter) is recorded
    twice, the second inside the first."""
    total = 0.0
    for e in events:
        if not e.flops:
            continue
        parent = e.cpu_parent
        while parent is not None and not parent.flops:
            parent = parent.cpu_parent
        if parent is None:
            total += e.flops
    return total


def _cuda_version() -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in (torch.version.cuda or "0").split(".")[:2])
    except ValueError:
        return (0,)


@contextlib.contextmanager
def cupti_detached() -> Iterator[None]:
    """Around torch.profiler's stop: TEARDOWN_CUPTI=1, so that Kineto detaches CUPTI (cuptiFinalize).

    Kineto leaves CUPTI attached unless that variable says otherwise, and CUPTI's callbacks then stay
    on every later CUDA call of the process: the rest of a watched run would be slower than the same
    run unwatched (benchmarks/cupti_teardown.py measures it). Kineto reads the variable as the
    profiler stops; it is put back as it was right after. Left alone where the user set it, and
    before CUDA 12.6, where CUPTI's teardown could crash a process that uses CUDA graphs."""
    if "TEARDOWN_CUPTI" in os.environ or _cuda_version() < (12, 6):
        yield
        return
    os.environ["TEARDOWN_CUPTI"] = "1"
    try:
        yield
    finally:
        os.environ.pop("TEARDOWN_CUPTI", None)


def compiled_code_seen() -> bool:
    """Whether torch.compile has compiled a graph in this process (dynamo's own counters, read where it is loaded).
    Compiled code runs its frames eagerly while a TorchDispatchMode is active: measured on a compiled MLP's CPU
    loop, the window's op and FLOP modes over 3 steps changed the run's loss from step 26 on (its updates in
    eager rounding)."""
    utils = sys.modules.get("torch._dynamo.utils")
    try:
        return bool(utils is not None and utils.counters["stats"]["unique_graphs"])
    except Exception:  # a torch whose counters are laid out otherwise: assume none
        return False


TRACE_OPS_KEPT = 20_000
"""The most ops and kernels of the window a trace keeps (the first ones)."""


def window_ops(events: Any, opened_at: float) -> list[WindowOp]:
    """torch.profiler's events (FunctionEvent: microseconds from the profiler's start) as WindowOps placed
    from `opened_at`: host ops, and the device's kernels, copies and memsets on their own track."""
    out = []
    for e in events:
        span = getattr(e, "time_range", None)
        if span is None or span.end <= span.start:
            continue
        track = "device" if "CUDA" in str(getattr(e, "device_type", "")) else "host"
        out.append(WindowOp(e.name, track, opened_at + span.start / 1e6, opened_at + span.end / 1e6))
        if len(out) >= TRACE_OPS_KEPT:
            break
    return out


class ProfileWindow:
    """Opens torch.profiler at the end of warm-up, closes it `steps` steps later. `outside()`: whether an
    op dispatched now is outside every phase the watcher names (None: not asked)."""

    def __init__(self, steps: int, outside: Callable[[], bool] | None = None,
                 edge: Callable[[], bool] | None = None, keep_ops: bool = False) -> None:
        self.steps = steps
        self.keep_ops = keep_ops
        """Keep the window's ops and kernels with their times, for a trace (only where it is torch.profiler)."""
        self.trace_ops: list[WindowOp] | None = None
        self.opened_at = 0.0
        """time.perf_counter() as torch.profiler started: where the window's ops are placed from."""
        self.outside = outside
        self.edge = edge
        self.prof: Any = None
        self.counter: OpCounter | None = None
        """Counts the ops outside the phases (on the CPU, every op as well)."""
        self.cuda = False
        self.first = -1
        self.ops_per_step: float | None = None
        self.kernels_per_step: float | None = None
        self.gpu_busy_ms_per_step: float | None = None
        """Milliseconds per step during which the GPU ran a kernel, copy or memset (CUDA only)."""
        self.flops_per_step: float | None = None
        """Multiply-add FLOPs of the ops PyTorch has formulas for (matmul, conv, ...), per step."""
        self.outside_ops_per_step: float | None = None
        """Aten ops dispatched outside every phase the watcher names, per step (None: not counted)."""
        self.compiled = False
        """torch.compile had compiled a graph in this process when the window opened (after the warm-up)."""
        self.edge_ops_per_step: float | None = None
        """CPU: aten ops dispatched in the edge phases (data, h2d, sync, checkpoint, comm), per step (None: not
        counted)."""
        self.outside_op_ms_per_step: float | None = None
        """Their host milliseconds per step."""
        self.op_times: list[OpTime] | None = None
        """CPU: the window's ops by op and dtype (`op_table`); None on CUDA (an op's host time is its launch)."""
        self.op_ms_per_step: float | None = None
        """CPU: every op's host milliseconds per step in the window, all together."""
        self.notes: list[str] = []

    @staticmethod
    def opens_at(warmup: int) -> int:
        """The first step the window profiles: the first after the warm-up (never step 0)."""
        return max(warmup, 1)

    def settled_from(self, warmup: int) -> int:
        """The first step that is neither warm-up nor under the window."""
        return self.opens_at(warmup) + self.steps if self.steps > 0 else warmup

    def on_step_end(self, index: int, warmup: int, cuda: bool) -> bool:
        """Called as step `index` ends; True if that step ran under the profiler."""
        if self.steps <= 0:
            return False
        profiled = self.prof is not None  # this step ran under the profiler
        if profiled and self.counter is not None:
            self.counter.end_step()
        if profiled and index >= self.first + self.steps - 1:
            self._close(self.steps)
        elif not profiled and self.first < 0 and index == self.opens_at(warmup) - 1:
            self._open(cuda, index + 1)
        return profiled

    def _open(self, cuda: bool, first: int) -> None:
        compiled = self.compiled = compiled_code_seen()
        if compiled:
            self.notes.append("torch.compile'd code ran before the profiler window: the window used torch.profiler "
                              "alone (a dispatch mode would send compiled code back to eager for its steps, and "
                              "change the run's numbers); no per-op times, and torch's ops outside the phases uncounted")
        if not cuda and not compiled:
            waited = threads_wait()  # the training thread's (the window opens at a step's end, on it)
            self.counter = OpCounter(self.outside, by_op=True, edge=self.edge, waited=waited, flops=True)
            self.prof = (self.counter,)
            self.counter.__enter__()
            self.first, self.cuda = first, False
            return
        activities = [torch.profiler.ProfilerActivity.CPU]
        if cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        try:
            with quiet_fd2():
                self.prof = torch.profiler.profile(activities=activities, with_flops=True)
                self.opened_at = time.perf_counter()
                self.prof.__enter__()
            self.first, self.cuda = first, cuda
        except Exception as e:  # another profiler is running, say: go on without counts
            self.prof = None
            self.notes.append(f"torch.profiler could not start ({type(e).__name__}): no op or kernel counts")
            return
        if self.outside is not None and not compiled:  # inside the profiler: it sees each op once, as without the mode
            self.counter = OpCounter(self.outside)
            self.counter.__enter__()

    def _take_counter(self, steps: int) -> None:
        """Leave the op counter (if any) and keep its per-step figures."""
        counter, self.counter = self.counter, None
        if counter is None:
            return
        counter.__exit__(None, None, None)
        if isinstance(counter.waited, ThreadWait):
            counter.waited.close()
        if counter.outside is not None:
            self.outside_ops_per_step = counter.outside_ops / steps
            self.outside_op_ms_per_step = self.outside_ops_per_step * least_per_call(counter.outside_steps) * 1e3

    def _close(self, steps: int) -> None:
        prof, self.prof = self.prof, None
        if isinstance(prof, tuple):  # the CPU's dispatch mode: the op counter, which counts FLOPs too
            (counter,) = prof
            self._take_counter(steps)
            self.ops_per_step = counter.ops / steps
            self.edge_ops_per_step = counter.edge_ops / steps if counter.edge is not None else None
            self.kernels_per_step = None
            self.flops_per_step = counter.total_flops / steps
            if counter.steps_by_op:
                rows = op_rows(counter.steps_by_op, counter.flop_counts or {})
                self.op_times = op_table(rows)
                self.op_ms_per_step = sum(row.ms for row in rows)
            return
        self._take_counter(steps)
        try:
            with quiet_fd2(), cupti_detached():
                prof.__exit__(None, None, None)
            ops, kernels, busy = count_ops_and_kernels(prof)
            self.ops_per_step = ops / steps
            if self.cuda:  # kernels were traced only on CUDA
                self.kernels_per_step = kernels / steps
                self.gpu_busy_ms_per_step = busy / steps / 1e6
            self.flops_per_step = outer_flops(prof.events()) / steps
            if self.keep_ops:
                self.trace_ops = window_ops(prof.events(), self.opened_at)
        except Exception as e:
            self.notes.append(f"torch.profiler window failed ({type(e).__name__}): no op or kernel counts")

    def close(self) -> None:
        """End of the run: a window still open is closed without counts (too few steps)."""
        if self.prof is not None:
            prof, self.prof = self.prof, None
            with contextlib.suppress(Exception), quiet_fd2(), cupti_detached():
                if not isinstance(prof, tuple) and self.counter is not None:
                    self.counter.__exit__(None, None, None)
                for mode in reversed(prof) if isinstance(prof, tuple) else (prof,):
                    mode.__exit__(None, None, None)
            self.counter = None
            self.notes.append("the run ended inside the profiler window: no op or kernel counts")

    def part(self) -> Window:
        """The window's counts per step (all None where it never closed)."""
        return Window(ops_per_step=self.ops_per_step, kernels_per_step=self.kernels_per_step,
                      flops_per_step=self.flops_per_step, gpu_busy_ms_per_step=self.gpu_busy_ms_per_step,
                      other_ops_per_step=self.outside_ops_per_step, other_op_ms_per_step=self.outside_op_ms_per_step,
                      edge_ops_per_step=self.edge_ops_per_step, op_ms_per_step=self.op_ms_per_step,
                      op_times=self.op_times, compiled=self.compiled)
