"""The CPU's op counter: a dispatch mode that counts each aten op a step runs, times it by op and dtype, counts its
FLOPs with torch's own formulas, and notes how long its calls run in each phase (`op_lengths`). The profiler
window's on the CPU (`profile_window`), and the probes' and sweeps' op counts.

The mode sees the ops that reach the dispatcher after autograd and after composite ops are decomposed (nn.Linear:
t + addmm), each counted once; FlopCounterMode is not stacked on it (`profile_window`'s module note).

torch wraps a dispatch mode's `__torch_dispatch__` in `torch._dynamo.disable`, which imports torch._dynamo at the
mode's first op: about 2 s of one core (torch 2.13), the most the doctor cost a script of a few seconds. Where no
torch.compile machinery is loaded, `op_counter` hands out a counter without that wrapping; where it is, one with it
(compiled code must not trace into the mode's frames).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from trainspeed.load.op_lengths import OpKey, SizedOp
from trainspeed.watch.result import OpTime

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

    compile_safe = False
    """Whether torch wraps the class's `__torch_dispatch__` in torch._dynamo.disable as it is defined: not this
    class's (`op_counter`), its subclass `_CompileSafeCounter`'s."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return cls.compile_safe

    supports_higher_order_operators = True
    """torch.cond, flex_attention and the other higher-order ops run eagerly under the window: a mode without it made
    torch raise "There was no rule registered for HigherOrderOperator cond" in the user's script."""

    def __init__(self, outside: Callable[[], bool] | None = None, by_op: bool = False,
                 edge: Callable[[], bool] | None = None, waited: Callable[[], float] | None = None,
                 flops: bool = False, phase: Callable[[], str | None] | None = None) -> None:
        super().__init__()
        self.phase = phase
        """With `by_op`: the phase the watcher has open now (None: none), each timed call counted in it
        (`phase_calls`, `least_per_work`)."""
        self.phase_calls: dict[str, Counter[SizedOp]] = {}
        """Calls of each op, by dtype and by its work in a call (its FLOPs where torch has a formula, else the
        elements it gave), in each phase over the window ("other" outside every phase)."""
        self.least_per_work: dict[OpKey, float] = {}
        """Each op's (by dtype) least wall seconds of one call over its work: how long a call runs (`op_lengths`), a
        wait for a core only adding to it."""
        self.flop_counts: dict[Any, int] | None = Counter() if flops else None
        """With `flops`: FLOPs by op (overload packet), by torch's own formulas (torch.utils.flop_counter's registry),
        counted as FlopCounterMode counts them, an op with a composite form run as its parts. One mode instead of
        FlopCounterMode stacked on this one: each op passes through Python once, a third of the cost of both
        (BENCHMARKS.md, "Where the code's constants come from")."""
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
        self._first: tuple[int, int, int, float, dict[Any, int], dict[Any, tuple[int, float]]] = (0, 0, 0, 0.0, {}, {})
        """The counts as the step's first pass began (`first_pass`): ops, edge ops, ops outside, their seconds,
        FLOPs by op, calls and seconds by op and dtype."""
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

    def first_pass(self) -> None:
        """The step's first pass of the model begins: what was counted so far is the step's once (`grow`)."""
        self._first = (self.ops, self.edge_ops, self.outside_ops, self.outside_s, dict(self.flop_counts or {}),
                       {k: tuple(v) for k, v in (self.by_op or {}).items()})

    def grow(self, by: float) -> None:
        """A one-step count stopped at a pass: what it counted before the step's first pass (`first_pass`) once, the
        rest `by` the step's passes over those counted (`profile_window.ProfileWindow.pass_begins`)."""
        ops, edge, outside, outside_s, flops, table = self._first

        def grown(first: float, total: float) -> float:
            return first + (total - first) * by

        self.ops, self.edge_ops = round(grown(ops, self.ops)), round(grown(edge, self.edge_ops))
        calls, seconds = self.outside_steps[0]
        self.outside_ops = round(grown(outside, calls))
        self.outside_steps[0] = (self.outside_ops, grown(outside_s, seconds))
        if self.flop_counts is not None:
            for op, n in self.flop_counts.items():
                self.flop_counts[op] = round(grown(flops.get(op, 0), n))
        self.steps_by_op[0] = {key: [grown(table.get(key, (0, 0.0))[0], n), grown(table.get(key, (0, 0.0))[1], t)]
                               for key, (n, t) in self.steps_by_op[0].items()}

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
        key = (func.overloadpacket, _dtype_of(args)) if self.by_op is not None else None
        wall = 0.0
        if not outside and key is None:
            out = func(*args, **kwargs)
        else:
            out, wall = self._timed(func, args, kwargs, outside, key)
        flops = 0
        if counts is not None and (formula := flop_registry.get(func.overloadpacket)) is not None:
            flops = formula(*args, **kwargs, out_val=out)
            counts[func.overloadpacket] += flops
        if self.phase is not None and key is not None:
            work = flops or _elements(out) or (_elements(args[0]) if args else 0)  # in place: the tensors it changed
            self._count_call(key, work, wall)
        return out

    def _count_call(self, key: OpKey, work: int, wall: float) -> None:
        """A call of `key` doing `work` (FLOPs, or elements given) in the phase open now, of `wall` seconds."""
        assert self.phase is not None
        name = self.phase() or "other"
        calls = self.phase_calls.get(name)
        if calls is None:
            calls = self.phase_calls[name] = Counter()
        calls[key[0], key[1], work] += 1
        per_work = wall / max(work, 1)
        least = self.least_per_work.get(key)
        if least is None or per_work < least:
            self.least_per_work[key] = per_work

    def _timed(self, func: Any, args: Any, kwargs: dict[str, Any], outside: bool,
               key: OpKey | None) -> tuple[Any, float]:
        """Run `func`, its time (less its threads' wait for a core) counted outside and under `key` (by op; None:
        not); (its result, its wall seconds: how long it runs, `_count_call`)."""
        waited = self.waited
        if waited is not None:
            waited()  # from here
        t0 = time.perf_counter()
        try:
            out = func(*args, **kwargs)
        finally:
            took = wall = time.perf_counter() - t0
            if waited is not None:
                took = max(0.0, took - waited())
            if outside:
                self.outside_s += took
                self.outside_ops += 1
            if key is not None and self.by_op is not None:
                entry = self.by_op.get(key)
                if entry is None:
                    entry = self.by_op[key] = [0, 0.0]
                entry[0] += 1
                entry[1] += took
        return out, wall

    @property
    def total_flops(self) -> int:
        return sum(self.flop_counts.values()) if self.flop_counts is not None else 0


def _elements(out: Any) -> int:
    """The elements a call gave (its tensors' together): its work, where torch has no FLOP formula for the op."""
    if isinstance(out, torch.Tensor):
        return out.numel()
    if isinstance(out, (list, tuple)):
        return sum(o.numel() for o in out if isinstance(o, torch.Tensor))
    return 0


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

    The window's host times are the truth of a few steps only, and a stall adds to them and never takes away: the VM
    losing its core for a scheduler tick, an intra-op thread waited for. Such stalls made the seed's single log_softmax
    call a step look like milliseconds of work (BENCHMARKS.md, "Where the code's constants come from"), and the demo
    named compute_bound. An op's work does not change from step to step; its least per-call time over the window's steps
    is its time with no stall in it, unless every step stalled. Per call, not per step: an op may run more often in one
    step than in the next. Each call's time between the bounds of its threads' waits, as the phases take theirs
    (`wait_bounds`), was tried and not kept (the stalled log_softmax stayed several times its time, and the demo was
    named compute_bound); nor the longest one thread's wait for the ops with a FLOP formula (float64 products came to
    several times alone's; beside busy processes `slow_dtype` takes such products at their FLOPs over the dtype's rate),
    nor that wait for every op (a transformer's products read 3.3x alone's beside two busy processes, its dropout
    masks, one thread's, as alone: their share of the window's ops halved, and dropout_heavy went missing). The
    readings of the tries: BENCHMARKS.md, "Where the code's constants come from"."""
    return min((seconds / calls for calls, seconds in steps if calls > 0), default=0.0)


def main_phases(phase_calls: dict[str, Counter[SizedOp]]) -> dict[OpKey, str]:
    """Each op's (by dtype) phase: the one most of its work ran in (its calls there times each call's FLOPs, else
    elements: `OpCounter.phase_calls`), where its time goes. By calls alone, Adam's two divisions of 6.4 million
    elements a step went to the backward of two divisions of a few (a skip-gram's loss), and the backward's listed
    ops added to more than the backward."""
    by_op: dict[OpKey, Counter[str]] = {}
    for phase, calls in phase_calls.items():
        for (op, dtype, work), n in calls.items():
            by_op.setdefault((op, dtype), Counter())[phase] += n * max(work, 1)
    return {key: counts.most_common(1)[0][0] for key, counts in by_op.items()}


def op_rows(steps_by_op: list[dict[tuple[Any, torch.dtype | None], list[Any]]],
            flop_counts: dict[Any, float], phases: dict[OpKey, str] | None = None) -> list[OpTime]:
    """Every op of the window by op and dtype, per step, most host time first. An op's calls are its mean
    per step; its time is those calls at its least per-call time of a step (`least_per_call`). An op's
    FLOPs are given where it ran in one dtype only (FlopCounterMode counts by op, not dtype); its phase where
    `phases` (`main_phases`) has it."""
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
                           flops=flops[name] / n if arithmetic and dtypes[name] == 1 else None,
                           phase=(phases or {}).get((op, dtype))))
    rows.sort(key=lambda row: row.ms, reverse=True)
    return rows


def calls_by_phase(rows: list[OpTime]) -> dict[str, list[tuple[float, float]]]:
    """Of `op_rows`: each one's (calls, host milliseconds) per step, by phase (`OpTime.phase`; those without one left
    out)."""
    out: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        if row.phase is not None:
            out.setdefault(row.phase, []).append((row.calls, row.ms))
    return out


def op_table(rows: list[OpTime], keep: int = OP_TIMES_KEPT) -> list[OpTime]:
    """Of `op_rows`: the `keep` slowest of the step's own ops, the `keep` slowest of the others (a DataLoader's
    collate, a save's), and every op torch has a FLOP formula for; slowest first."""
    step = [row for row in rows if row.in_step][:keep]
    rest = [row for row in rows if not row.in_step][:keep]
    kept = {id(row) for row in step + rest}
    return [row for row in rows if id(row) in kept or row.arithmetic]


class _CompileSafeCounter(OpCounter):
    """The op counter with its `__torch_dispatch__` in torch._dynamo.disable (defined here, so torch wraps it), for a
    process that has loaded torch.compile's machinery."""

    compile_safe = True
    __torch_dispatch__ = OpCounter.__torch_dispatch__


def op_counter(*args: Any, **kwargs: Any) -> OpCounter:
    """An OpCounter (its arguments as OpCounter's): one that keeps torch.compile out of its frames where the process
    has loaded torch._dynamo, else one whose first op does not import it (the module's note)."""
    cls = _CompileSafeCounter if "torch._dynamo" in sys.modules else OpCounter
    return cls(*args, **kwargs)
