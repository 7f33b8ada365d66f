"""A few steps counted op by op: aten ops, FLOPs and (on CUDA) kernels per step, left out of the timings.

On CUDA the window also gives the GPU's busy time per step: how long some kernel, copy or memset
ran (CUPTI's timestamps, overlaps counted once). That is the GPU's own work. CUDA events at the
phase edges cannot give it: an event pair spans the time between two points of the stream, and
that span includes the gaps where the GPU waits for the host to launch the next kernel.

On CUDA the window is torch.profiler (kernels need CUPTI). On the CPU it is one dispatch mode, an
op counter that also counts FLOPs with torch's own formulas: torch.profiler's first start in a process
costs one to two seconds of a core here (its `prepare_trace` asks `hasattr(torch, "_inductor")`, which imports
torch._inductor), a large share of a short CPU job, while the mode costs nothing until it is entered (nor at its
first op: `op_counter.op_counter`). FlopCounterMode itself is not used: its module tracker hooks every
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
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

from trainspeed._io import quiet_fd2
from trainspeed.load.op_lengths import OpLengths, phase_op_lengths
from trainspeed.load.waits import ThreadWait, threads_wait
from trainspeed.watch.op_counter import (
    OpCounter,
    calls_by_phase,
    least_per_call,
    main_phases,
    op_counter,
    op_rows,
    op_table,
)
from trainspeed.watch.result import Window
from trainspeed.watch.trace import WindowOp


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


PASS_OPS = 20_000
"""A step of several passes of the model (an LBFGS closure's evaluations, micro-batches) under a window of one step
(a run of few long steps) is counted no further once its passes so far have counted this many ops: the ops of the
passes counted, scaled by the step's passes over them, are the step's. The CPU's op counter costs 12 to 25 us an op,
so a step of 220,000 ops (an LBFGS step over an nn.LSTMCell loop) took 5 s more counted whole, the doctor's whole
cost on that script (BENCHMARKS.md, "The whole process")."""


class ProfileWindow:
    """Opens torch.profiler at the end of warm-up, closes it `steps` steps later. `outside()`: whether an
    op dispatched now is outside every phase the watcher names (None: not asked)."""

    def __init__(self, steps: int, outside: Callable[[], bool] | None = None,
                 edge: Callable[[], bool] | None = None, keep_ops: bool = False,
                 phase: Callable[[], str | None] | None = None,
                 waits_count: Callable[[], bool] = lambda: True) -> None:
        self.steps = steps
        self.phase = phase
        """The phase the watcher has open now: where the window's ops ran (`op_lengths`)."""
        self.waits_count = waits_count
        """Asked as the CPU window opens: whether the threads' waits for a core are read around each op, to time it less
        its wait (`load.tracker.LoadTracker.threads_waited`: other processes on the cores)."""
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
        self.counted = Window()
        """What the window counted per step (all None until it closes with counts)."""
        self.op_lengths: dict[str, OpLengths] = {}
        """CPU: each phase's ops and how long one call of each takes (`op_lengths.phase_op_lengths`): how the phases'
        waits for a core are joined (`load.waits.WaitMeter.ops_known`). Empty on CUDA, where an op's host time is its
        launch."""
        self.notes: list[str] = []
        self.opening = False
        """True while the window opens or closes (torch.profiler synchronises the device then: no sync of the
        script's)."""
        self.open = False
        """Whether the window is open (its steps run under the profiler)."""
        self.span: tuple[float, int] = (0.0, 0)
        """(seconds from the window's opening to its close, the steps it profiled) once it closed: the watcher's own
        part of the loop's wall time (its steps run several times slower under the op counter), which the loop's
        time holds as that many median steps (`StepSamples.loop_seconds`)."""
        self._opening_at = 0.0
        self.passes = 0
        """The model's passes (calls with gradients on) begun in the profiled steps so far (`pass_begins`)."""
        self.cut: int | None = None
        """The passes the op counter counted where it stopped before its one step's end (`PASS_OPS`); None: it
        counted every op."""

    def profile(self, steps: int) -> None:
        """Profile `steps` steps where the window has not opened yet (a run of few long steps: one)."""
        if self.first < 0 and self.prof is None:
            self.steps = steps

    def on_step_end(self, index: int, opens_at: int, cuda: bool) -> bool:
        """Called as step `index` ends (the window opens with step `opens_at`); True if that step ran under the
        profiler. While it opens or closes, `opening` is True (torch.profiler synchronises the device then)."""
        if self.steps <= 0:
            return False
        profiled = self.prof is not None  # this step ran under the profiler
        if profiled and self.counter is not None and self.cut is None:
            self.counter.end_step()
        self.opening = True
        try:
            if profiled and index >= self.first + self.steps - 1:
                self._close(self.steps)
                self.span = (time.perf_counter() - self._opening_at, self.steps)
            elif not profiled and self.first < 0 and index == opens_at - 1:
                self._opening_at = time.perf_counter()
                self._open(cuda, index + 1)
        finally:
            self.opening = False
            self.open = self.prof is not None
        return profiled

    def _open(self, cuda: bool, first: int) -> None:
        compiled = compiled_code_seen()
        self.counted = replace(self.counted, compiled=compiled)
        if compiled:
            self.notes.append("torch.compile'd code ran before the profiler window: the window used torch.profiler "
                              "alone (a dispatch mode would send compiled code back to eager for its steps, and "
                              "change the run's numbers); no per-op times, and torch's ops outside the phases uncounted")
        if not cuda and not compiled:
            # the training thread's (the window opens at a step's end, on it), where a wait for a core is likely
            waited = threads_wait() if self.waits_count() else None
            self.counter = op_counter(self.outside, by_op=True, edge=self.edge, waited=waited, flops=True,
                                     phase=self.phase)
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
            self.counter = op_counter(self.outside)
            self.counter.__enter__()

    def pass_begins(self) -> None:
        """The model is called with gradients on: a pass begins. In the one step of a window of one (a run of few
        long steps), the op counter stops here where the passes before this one counted `PASS_OPS` ops or more,
        and is the mode on top (one the script entered after it stays its own)."""
        counter = self.counter
        if not self.open or counter is None or not isinstance(self.prof, tuple):
            return
        self.passes += 1
        if self.passes == 1:  # what the step ran before its first pass, counted once whatever the passes
            counter.first_pass()
        if self.cut is None and self.steps == 1 and self.passes > 1 and counter.ops >= PASS_OPS and \
                _get_current_dispatch_mode() is counter:
            self.cut = self.passes - 1
            counter.end_step()
            counter.__exit__(None, None, None)

    def _take_counter(self, steps: int) -> None:
        """Leave the op counter (if any; where it stopped at `cut`, it was left then) and keep its per-step
        figures."""
        counter, self.counter = self.counter, None
        if counter is None:
            return
        if self.cut is None:
            counter.__exit__(None, None, None)
        if isinstance(counter.waited, ThreadWait):
            counter.waited.close()
        if counter.outside is not None:
            outside = counter.outside_ops / steps
            self.counted = replace(self.counted, other_ops_per_step=outside,
                                   other_op_ms_per_step=outside * least_per_call(counter.outside_steps) * 1e3)

    def _close(self, steps: int) -> None:
        prof, self.prof = self.prof, None
        if isinstance(prof, tuple):  # the CPU's dispatch mode: the op counter, which counts FLOPs too
            (counter,) = prof
            self._scale(counter)
            self._take_counter(steps)
            self.counted = replace(self.counted, ops_per_step=counter.ops / steps, kernels_per_step=None,
                                   edge_ops_per_step=counter.edge_ops / steps if counter.edge is not None else None,
                                   flops_per_step=counter.total_flops / steps)
            if counter.steps_by_op:
                rows = op_rows(counter.steps_by_op, counter.flop_counts or {}, main_phases(counter.phase_calls))
                self.counted = replace(self.counted, op_times=op_table(rows), op_ms_per_step=sum(row.ms for row in rows),
                                       op_calls_by_phase=calls_by_phase(rows))
                self.op_lengths = phase_op_lengths(counter.least_per_work, counter.phase_calls)
            return
        self._take_counter(steps)
        try:
            with quiet_fd2(), cupti_detached():
                prof.__exit__(None, None, None)
            ops, kernels, busy = count_ops_and_kernels(prof)
            self.counted = replace(self.counted, ops_per_step=ops / steps, flops_per_step=outer_flops(prof.events()) / steps)
            if self.cuda:  # kernels were traced only on CUDA
                self.counted = replace(self.counted, kernels_per_step=kernels / steps,
                                       gpu_busy_ms_per_step=busy / steps / 1e6)
            if self.keep_ops:
                self.trace_ops = window_ops(prof.events(), self.opened_at)
        except Exception as e:
            self.notes.append(f"torch.profiler window failed ({type(e).__name__}): no op or kernel counts")

    def close(self) -> None:
        """End of the run: a window still open is closed without counts (too few steps)."""
        self.opening = True
        try:
            self._close_early()
        finally:
            self.opening = False
            self.open = self.prof is not None

    def _scale(self, counter: OpCounter) -> None:
        """Where the counter stopped at `cut`: its figures made the step's, in place. What it counted before the
        step's first pass (a DataLoader's batch, the script's work between steps) is the step's once; what the `cut`
        passes counted is scaled by the step's passes over them (how long one call of an op runs is as counted)."""
        if self.cut is None or not counter.steps_by_op:
            return
        counted = counter.ops
        counter.grow(self.passes / self.cut)
        self.notes.append(f"the profiler window counted the first {self.cut} of its step's {self.passes} passes of the "
                          f"model ({counted:,} ops) and scaled them to the step: counting each op of a step this long "
                          "would have added seconds to the run")

    def _close_early(self) -> None:
        if self.prof is not None:
            prof, self.prof = self.prof, None
            with contextlib.suppress(Exception), quiet_fd2(), cupti_detached():
                if not isinstance(prof, tuple) and self.counter is not None:
                    self.counter.__exit__(None, None, None)
                if self.cut is None:  # a counter stopped at a pass was left then
                    for mode in reversed(prof) if isinstance(prof, tuple) else (prof,):
                        mode.__exit__(None, None, None)
            self.counter = None
            self.notes.append("the run ended inside the profiler window: no op or kernel counts")

    def part(self) -> Window:
        """The window's counts per step (all None where it never closed)."""
        return self.counted
