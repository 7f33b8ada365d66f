"""The watcher: hooks in, a phase clock, counters, a sampler, a short profiler window; a result out.

Steps are delimited by optimizer steps (torch.optim's global step hooks), or by backward calls
when no optimizer is used. The first `warmup` steps are left out of the statistics, and so are
the `profile_steps` after them, during which torch.profiler counts ops and kernels (and, on CUDA,
times the GPU's own work). On CUDA each phase's device span comes from CUDA events recorded at its
edges on the detailed steps and read back only once they have completed (event.query()): the
watcher adds no synchronisation of its own.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import random
import resource
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import psutil
import torch

from trainspeed.diagnose.scaling import bus_bandwidth_gbs, predict
from trainspeed.probe.loader import item_like
from trainspeed.probe.optimizer import OptimizerSpec, spec_of
from trainspeed.watch import machine_load
from trainspeed.watch.comm import CommStep, CommTimer
from trainspeed.watch.gather import gather, rank_stat, this_rank
from trainspeed.watch.hooks import Hooks
from trainspeed.watch.loader_info import loader_info
from trainspeed.watch.phases import CALL_PHASES, EDGE_PHASES, PHASES, PhaseClock
from trainspeed.watch.profile_window import ProfileWindow
from trainspeed.watch.result import (
    Evaluation,
    GpuUtil,
    LoaderInfo,
    DistRun,
    OptimizerInfo,
    OtherSite,
    PhaseStat,
    RankStat,
    ScalePoint,
    StepRecord,
    SyncSite,
    WatchResult,
)
from trainspeed.watch.sampler import Sampler, loop_codes, source_of
from trainspeed.watch.sawtooth import detect_sawtooth
from trainspeed.watch.stats import Reservoir, median, quantile
from trainspeed.watch.syncs import SyncCounter, reading

DEVICE_PHASES = ("h2d", "forward", "backward", "optimizer")
"""Phases whose device time is taken with CUDA events (the others do no device work of their own)."""
PLOT_STEPS = 400
DETAILED_FIRST = 50
"""Measured steps that are all detailed before sampling starts."""
DETAIL_BLOCK = 64
"""Detailed steps come in runs of this many: switching the per-call hooks in or out costs about 0.2 ms each
way (setting or deleting attributes of nn.Module and the optimizer classes modifies every subclass, and the step
after it re-specialises the call sites that touched them: 0.15 to 0.17 ms and +30 to 40 us on the seed loop,
2026-11-24), so it must be rare."""
SWITCHES_PER_DOUBLING = 32
"""After every this many detailed runs, the runs (and the gaps between them) grow twice as long: the
share of detailed steps stays one in `detail_every`, while the hook switches, which modify
torch.nn.Module's class (see hooks.RESUME_BUDGET), grow only with the logarithm of the run's length."""
QUIET_MAX = 64
"""A quiet run lasts at most this many steps: the step after it adds the run's data, h2d, sync and
checkpoint seconds to the clock's sums, and a run the script ends inside is left out of them."""


class StopWatching(BaseException):
    """Raised from a hook when the requested number of steps is reached (BaseException, so a
    script's `except Exception` does not swallow it)."""


@dataclasses.dataclass
class _Spans:
    """Evaluation spans of one kind ended during the measured steps: how many, their seconds, and the step counts at
    the first and the last of them."""

    count: int = 0
    seconds: float = 0.0
    first: int = -1
    last: int = -1

    def add(self, seconds: float, steps: int) -> None:
        self.count += 1
        self.seconds += seconds
        self.first = steps if self.first < 0 else self.first
        self.last = steps


class Watcher:
    """Context manager that watches a training loop; `measurements()` returns a WatchResult,
    `result()` the doctor's DoctorReport (measurements, hardware, verdicts)."""

    def __init__(self, warmup: int = 3, steps: int | None = None, profile_steps: int = 3,
                 sample_hz: float = 50.0, now: Callable[[], float] = time.perf_counter,
                 detail_every: int = 32) -> None:
        self.warmup, self.max_steps, self.sample_hz = warmup, steps, sample_hz
        self.detail_every = detail_every
        """After the first DETAILED_FIRST measured steps, about one step in `detail_every` is
        detailed (every module call, backward and zero_grad timed): runs of DETAIL_BLOCK detailed
        steps separated by runs of edges-only steps of random length, so that no periodic pattern
        of the loop lines up with them. 1: every step detailed."""
        self.detailed = True
        self._detail_rng = random.Random(7)
        self.quiet_until = 0
        """Steps with a lower index are quiet: their end only counts them, and their host reads go only
        to the tally of their line (so does the step that ends the quiet run, passed over too). 0: none."""
        self._quiet_from = 0
        self._quiet_read_s = 0.0
        self.clock = PhaseClock(now)
        self.hooks = Hooks(self)
        # the hot path calls the clock directly (one Python frame per phase edge, not two);
        # _set_edges() swaps in the versions that also record CUDA events
        self.enter = self.clock.enter
        self.exit = self.clock.exit
        self.syncs = SyncCounter(on_read=self.read_span)
        self._thread = threading.get_ident()
        self._measure_from_scratch(profile_steps)
        self.sampler: Sampler | None = None
        self.load_from: machine_load.LoadMark | None = None
        self.load_to: machine_load.LoadMark | None = None
        """The machine's CPU counters as the measured steps started and as the watch stopped."""
        self.step_syncs = 0
        self.step_h2d = 0
        self.step_anomaly_s = 0.0
        """Seconds the step running now spent formatting Python stacks for autograd's anomaly detection
        (detailed steps)."""
        self.step_calls = [0, 0, 0, 0, 0, 0]
        """[outermost module calls, backward calls, steps of optimizers other than the primary one, calls
        of the model, calls of the model given a tensor that autograd has recorded (the output of an
        earlier call: a recurrent cell stepped by hand), calls of the model after a host read since its
        last call (an agent acting in an environment on the action it read)] of the step running now,
        counted while the per-call hooks are in (detailed steps), outside the optimizer's step (an LBFGS
        closure)."""
        self._reads_at_call = 0
        """`step_syncs` at the model's last call this step."""
        self.primary_optimizer: int | None = None
        self._primary_ref: weakref.ref[torch.optim.Optimizer] | None = None
        self._rival: tuple[int, int] | None = None
        """(id, steps seen) at the last step of an optimizer other than the primary one."""
        self.primary_changes = 0
        """Times another optimizer took over delimiting the steps (the primary one gone, or stopped)."""
        self.optimizers_built = 0
        """Optimizers constructed after the first step of one (a new optimizer every step)."""
        self.optimizer_build_s = 0.0
        self._model_id = 0
        self.device = "cpu"
        self.opening_window = False
        """True while the profiler window opens or closes (torch.profiler synchronises the device then)."""
        self.device_index = 0
        self.batch_size: int | None = None
        self.loaders: dict[int, LoaderInfo] = {}
        self.loader_batches: dict[int, int] = {}
        """Batches asked of each loader (by the id of its dataset), warm-up included."""
        self.loader_probes: dict[int, tuple[Any, int]] = {}
        """(an item shaped like the loader's, the rows of its TensorDataset when it is `batchable`, else 0) per loader."""
        self.events: list[tuple[str, Any, Any]] = []
        self.open_events: list[tuple[str, Any]] = []
        self.pending: collections.deque[tuple[StepRecord, list[tuple[str, Any, Any]]]] = collections.deque(maxlen=256)
        self.running = False
        self.h2d_kinds: dict[str, int] = {}
        self.backward_boundary = False
        self.notes: list[str] = []
        self.model: weakref.ref[torch.nn.Module] | None = None
        self.input_spec: tuple[list[int], torch.dtype] | None = None
        self.optimizer_kind: str | None = None
        self.optimizer_spec: OptimizerSpec | None = None
        """The primary optimizer's class, settings and parameter shapes, for the doctor's probe."""
        self.comm = CommTimer()
        self.gathered: list[RankStat] | None = None
        self._gather_done = False
        self._undo_destroy: Callable[[], None] | None = None

    def _measure_from_scratch(self, profile_steps: int) -> None:
        """What the watcher measures from the first step on: the step count, the profiler window and the
        warm-up it settles after, the samples, the loaders' starts and the detail schedule. Set at
        construction, and again when the first optimizer step comes after backward-delimited steps
        (`_rebase`)."""
        self.window = ProfileWindow(profile_steps, outside=self._outside_phases, edge=self._in_edge_phase)
        self.settled_at = self.window.settled_from(self.warmup)
        self.steps_seen = 0
        self.measured = Reservoir[StepRecord](seed=1)
        self.detailed_steps = Reservoir[StepRecord](seed=5) if self.detail_every > 1 else None
        """A uniform sample of the measured detailed steps alone: forward, backward and optimizer's median
        host times come from it (the step sample holds about one detailed step in `detail_every`).
        None when every step is detailed: the step sample is one of them."""
        self.warm = Reservoir[StepRecord](seed=2)
        self.plot_steps: list[StepRecord] = []
        self.device_ms = {p: Reservoir[float](seed=3) for p in DEVICE_PHASES}
        self.comm_steps = Reservoir[CommStep](seed=4)
        self.loader_starts = 0
        self.loader_start_s = 0.0
        """DataLoader iterators started during the measured steps, and the seconds those starts took
        with their first batch, and the stops of their workers (`loader_started`)."""
        self._mode_left = 0
        self._detail_runs = 0
        self.evals = _Spans()
        """Evaluations (model.eval() ... model.train() with no step between) ended during the measured steps
        (`mode_set`)."""
        self._eval_from: tuple[float, int] | None = None
        self.quiet_evals = _Spans()
        """Evaluations without model.eval(): spans of torch.no_grad() or torch.inference_mode() entered outside every
        phase in which the model was called, with no step ended inside, during the measured steps
        (`grad_off_entered`)."""
        self._grad_off: tuple[float, int] | None = None
        self._grad_off_called = False
        self._grad_off_hook: Any = None

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> Watcher:
        self.syncs.__enter__()
        self.hooks.install()
        self.comm.install()
        self._watch_destroy()
        # sample 'other' only inside the loop (after the first step), never during setup; on steps
        # watched at their edges only, the sampler reads the phase from the stack (sampler.PHASE_FILES)
        self.sampler = Sampler(lambda: self.steps_seen > 0 and not self.clock.stack,
                               hz=self.sample_hz)
        self.sampler.start()
        self.clock.end_step()  # the first step starts now
        if self.settled_at == 0:
            self._start_sums()
        self.running = True
        return self

    def _start_sums(self) -> None:
        """The measured steps start now: their sums, and the machine's load beside them. Called at a step's
        end (or backward's), under the training loop's frames: the sampler learns them here."""
        self.clock.start_sums()
        self.load_from = machine_load.mark()
        if self.sampler is not None:
            self.sampler.learn_loop(loop_codes(sys._getframe(1)))

    def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        self.load_to = machine_load.mark() if self.load_from is not None else None
        if self.backward_boundary:  # the last step of a loop without an optimizer
            self.backward_boundary = False
            self.max_steps = None
            self.step_ended()
        self._catch_up(self.steps_seen)
        with self._profiler_edge():
            self.window.close()
        self.hooks.uninstall()
        self.comm.uninstall()
        if not self._gather_done and this_rank() is not None:
            self._gather()
        if self._undo_destroy is not None:
            self._undo_destroy()
            self._undo_destroy = None
        self.syncs.__exit__(None, None, None)
        if self.sampler is not None:
            self.sampler.stop()
        for record, events in self.pending:  # the run is over: waiting for the device costs it nothing
            events[-1][2].synchronize()
            self._device_times(record, events)
        self.pending.clear()

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        self.stop()
        return exc_type is StopWatching  # --steps reached: end quietly

    # -- the listener interface the hooks call -------------------------------------------------
    def _enter_with_events(self, phase: str) -> None:
        """A phase edge on a detailed CUDA step: the host clock, then a CUDA event. Making and recording
        the event (a few us of the watcher's own) is skipped: no phase's, and not the step's."""
        self.clock.enter(phase)
        if phase in DEVICE_PHASES:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.open_events.append((phase, ev))
            self.clock.skip()

    def _exit_with_events(self, phase: str) -> None:
        self.clock.exit(phase)
        if self.open_events and self.open_events[-1][0] == phase:
            _, start = self.open_events.pop()
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.events.append((phase, start, end))
            self.clock.skip()  # else the event's cost falls into "other", after the phase closed

    @contextlib.contextmanager
    def _profiler_edge(self) -> Iterator[None]:
        """The profiler window opens or closes inside: torch.profiler's own synchronize is not the script's."""
        self.opening_window = True
        try:
            yield
        finally:
            self.opening_window = False

    def _outside_phases(self) -> bool:
        """Whether an op dispatched now runs in "other": on the thread that runs the steps, with no phase
        open and no host read under way (a read's op is the sync phase's)."""
        return not self.clock.stack and threading.get_ident() == self._thread and not reading()

    def _in_edge_phase(self) -> bool:
        """Whether an op dispatched now (not in "other") runs in an edge phase: on the thread that runs the steps,
        in a host read or with data, h2d, sync, checkpoint or comm open innermost."""
        stack = self.clock.stack
        return threading.get_ident() == self._thread and (reading() or bool(stack) and stack[-1] in EDGE_PHASES)

    def _set_edges(self) -> None:
        """Phase edges also record CUDA events on the detailed steps of a CUDA run, and only there. On the
        other steps only the copies to the device (h2d) have edges among the device phases; an event
        is a CUDA call or two, dear next to a tiny step, and the detailed steps (about one in
        `detail_every`, in runs placed at random) sample the copies' device spans well enough."""
        if self.device == "cuda" and self.detailed:
            self.enter = self._enter_with_events  # type: ignore[method-assign]
            self.exit = self._exit_with_events  # type: ignore[method-assign]
        else:
            self.enter = self.clock.enter  # type: ignore[method-assign]
            self.exit = self.clock.exit  # type: ignore[method-assign]

    def forward_pre(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        if self.backward_boundary:  # no optimizer: the step that ended in backward closes here
            self.backward_boundary = False
            self.step_ended()
        if self.model is None or self.steps_seen <= self.warmup:  # later, keep the hot path short
            self._learn_call(module, args)
        if len(self.clock.stack) == 1:  # not inside an optimizer's step (an LBFGS closure)
            calls = self.step_calls
            calls[0] += 1
            if id(module) == self._model_id:
                calls[3] += 1
                if calls[3] > 1:
                    if any(isinstance(a, torch.Tensor) and a.grad_fn is not None for a in args):
                        calls[4] += 1
                    if self.step_syncs > self._reads_at_call:
                        calls[5] += 1
                self._reads_at_call = self.step_syncs

    def _learn_call(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        """The model, its input, its device and the batch size, from the outermost module calls of the first steps."""
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if first is None:
            return
        if self.model is None and _has_parameters(module) and torch.is_grad_enabled():
            # the first outermost module with parameters called with gradients on is the model (a loss module has
            # none; a distillation's teacher, a target network, a validation pass run under no_grad)
            self.model = weakref.ref(module)
            self._model_id = id(module)
            self.input_spec = (list(first.shape[1:]), first.dtype)
        if first.device.type == "cuda" and self.device != "cuda":
            self.device, self.device_index = "cuda", first.device.index or 0
            self.syncs.count_device_reads_only()
            self._set_edges()
            if self.sampler is not None:
                self.sampler.want_gpu(self.device_index)
        if self.batch_size is None and first.dim() > 0:
            self.batch_size = int(first.shape[0])

    def open_host(self, phase: str) -> int:
        """Open `phase` on the host clock alone (no CUDA events); returns the depth `close_host` takes."""
        depth = len(self.clock.stack)
        self.clock.enter(phase)
        return depth

    def close_host(self, depth: int) -> None:
        self.clock.leave(depth)

    def _is_primary(self, optimizer: torch.optim.Optimizer) -> bool:
        """Whether `optimizer` is the one whose steps delimit the watched steps: the first one seen, until
        it is gone (a script that builds a new optimizer every step or every stage drops the old one) or
        another one steps twice with no step of it in between (a second stage's optimizer, the old one
        kept; a critic stepped five times per generator step); that one delimits them from then on.
        Runs at the first step of the first optimizer and at every step of the others: each class
        seen stepping has its whole step timed from then on (Hooks.watch_optimizer)."""
        if type(optimizer) not in self.hooks.optimizer_classes:
            self.hooks.watch_optimizer(type(optimizer))
        if self.primary_optimizer is None:
            self._make_primary(optimizer)
            backwards = self.steps_seen + self.backward_boundary  # the last one's step had not ended
            self.backward_boundary = False  # steps were delimited by backward calls until now
            if self.steps_seen:
                self._rebase(backwards)
        elif id(optimizer) != self.primary_optimizer:
            gone = self._primary_ref is not None and self._primary_ref() is None
            mark = (id(optimizer), self.steps_seen)
            if gone or self._rival == mark:
                self._make_primary(optimizer)
                self.primary_changes += 1
            else:
                self._rival = mark
        return id(optimizer) == self.primary_optimizer

    def _make_primary(self, optimizer: torch.optim.Optimizer) -> None:
        self.primary_optimizer = id(optimizer)
        try:
            self._primary_ref = weakref.ref(optimizer)
        except TypeError:  # a class with __slots__ and no __weakref__: known gone only by the other rule
            self._primary_ref = None
        self._rival = None
        self.optimizer_kind = type(optimizer).__name__.lower()
        self.optimizer_spec = spec_of(optimizer)

    def optimizer_built(self, seconds: float) -> None:
        """An optimizer was constructed (its __init__ took `seconds`): counted once one has stepped."""
        if self.primary_optimizer is not None:
            self.optimizers_built += 1
            self.optimizer_build_s += seconds

    def _rebase(self, backwards: int) -> None:
        """The first optimizer step came after steps delimited by backward calls: those were the
        micro-batches of a step (gradients accumulated over several backward calls before the first
        `optimizer.step()`), or a stretch of the script before its training loop, not training steps.
        The step ending now becomes step 0 and everything is measured again from it: warm-up, the
        profiler window, the samples and the sums, the sampler's 'other' lines and --steps' count."""
        self.notes.append(f"the first optimizer step came after {backwards} backward calls (micro-batches "
                          "accumulated before it): measured from that step on, as training steps")
        if self.window.prof is not None:
            with self._profiler_edge():
                self.window.close()
        self._measure_from_scratch(self.window.steps)
        self.pending.clear()
        self.clock.forget_sums()
        if self.settled_at == 0:
            self._start_sums()
        if self.sampler is not None:
            self.sampler.forget_other()

    def backward_done(self) -> None:
        """A backward call returned (counted). Without an optimizer, a backward ends a step - known only
        once the next forward (or backward) starts without an optimizer step in between."""
        if self.clock.stack:  # inside another backward, a module's forward or an optimizer's step (LBFGS)
            return
        if self.primary_optimizer is None:
            if self.backward_boundary:
                self.step_ended()
            self.backward_boundary = True
        self.step_calls[1] += 1

    def h2d(self, nbytes: int, pinned: bool, non_blocking: bool) -> None:
        """A tensor was copied to an accelerator. From the first such copy (`model.to(device)`, before the
        loop's first forward), reading a CPU tensor is no sync: it waits for no device's queue (a
        DataLoader's `randperm(n).tolist()` and seed `.item()`s at the loop's first `for`)."""
        if not self.syncs.device_only:
            self.syncs.count_device_reads_only()
        self.step_h2d += nbytes
        kind = ("pinned" if pinned else "pageable") + (", non_blocking" if non_blocking else "")
        self.h2d_kinds[kind] = self.h2d_kinds.get(kind, 0) + nbytes

    def loader_seen(self, iterator: Any) -> bool:
        """A batch is asked of a DataLoader iterator; True the first time its dataset is seen (the hooks then
        hand its first batch to `loader_batch`)."""
        key = _loader_key(iterator)
        if key in self.loader_batches:
            self.loader_batches[key] += 1
            return False
        self.loader_batches[key] = 1
        self.loaders[key] = loader_info(iterator)
        return True

    def loader_batch(self, iterator: Any, batch: Any) -> None:
        """The first batch of a loader: the probes after the run copy its shapes (and, for a TensorDataset
        fetched row by row, its number of rows); nothing of the user's data is kept."""
        key = _loader_key(iterator)
        info = self.loaders[key]
        rows = len(iterator._dataset) if info.batchable else 0
        self.loader_probes[key] = (item_like(batch, info.batch_size) if info.batch_size else None, rows)

    def loader_started(self, seconds: float, stop: bool = False) -> None:
        """A DataLoader iterator was started and gave its first batch, in `seconds`; or (`stop`) one with
        workers stopped them, in `seconds`. Counted from the first measured step on, as the clock's sums are."""
        if self.clock.sums is not None:
            self.loader_starts += not stop
            self.loader_start_s += seconds

    def mode_set(self, module: torch.nn.Module, training: bool) -> None:
        """A module's mode was set (`model.eval()`, `model.train()`). From a module with parameters put in
        evaluation mode to the next `train()` is an evaluation, if no step ended between (a model trained in
        eval mode, to freeze its batch norm, trains on) and the steps are measured."""
        if not training:
            if self._eval_from is None and _has_parameters(module):
                self._eval_from = (self.clock.now(), self.steps_seen)
            return
        if self._eval_from is None:
            return
        (t0, steps), self._eval_from = self._eval_from, None
        if steps == self.steps_seen and self.clock.sums is not None:
            self.evals.add(self.clock.now() - t0, steps)

    def grad_off_entered(self) -> None:
        """torch.no_grad() or torch.inference_mode() entered on the watched thread (the outermost one). Outside every
        phase, during the measured steps and outside a model.eval() span, it may hold an evaluation: a global
        module pre-hook stands until the model is called (then it goes, and the rest of the span's module calls take
        torch's fast path again) or the span ends."""
        if self.clock.stack or self.clock.sums is None or self._eval_from is not None or self._model_id is None:
            return
        self._grad_off = (self.clock.now(), self.steps_seen)
        self._grad_off_called = False
        self._grad_off_hook = torch.nn.modules.module.register_module_forward_pre_hook(self._grad_off_call)

    def _grad_off_call(self, module: torch.nn.Module, args: Any) -> None:
        if id(module) == self._model_id and self._grad_off_hook is not None:
            self._grad_off_called = True
            self._grad_off_hook.remove()
            self._grad_off_hook = None

    def grad_off_left(self) -> None:
        """The outermost torch.no_grad() or torch.inference_mode() on the watched thread was left."""
        if self._grad_off is None:
            return
        if self._grad_off_hook is not None:
            self._grad_off_hook.remove()
            self._grad_off_hook = None
        (t0, steps), self._grad_off = self._grad_off, None
        if self._grad_off_called and steps == self.steps_seen and self.clock.sums is not None:
            self.quiet_evals.add(self.clock.now() - t0, steps)

    def read_span(self, op: str, t0: float, t1: float, frame: Any) -> None:
        """A host read ran from t0 to t1 (the counter has tallied it by its line already): into the phase
        clock. Not called during a quiet run."""
        self.clock.span("sync", t0, t1)
        self.step_syncs += 1

    def anomaly_stack(self, seconds: float) -> None:
        self.step_anomaly_s += seconds

    def host_read(self, op: str, t0: float, t1: float, frame: Any) -> None:
        """A host read that the hooks saw (torch.cuda.synchronize) ran from t0 to t1, made by `frame`."""
        self.syncs.record(op, t0, t1, frame)

    # -- steps ------------------------------------------------------------------------------
    def step_ended(self, optimizer: torch.optim.Optimizer | None = None, *hook_args: Any) -> None:
        """A step ended. torch's global optimizer post hook calls this directly (with the optimizer,
        the step's args and kwargs): the first optimizer seen delimits the steps. Without an
        optimizer, the backward path calls it with none.

        Runs once per step, between the user's torch work, where its code and data have gone cold:
        a settled step the uniform sample passes over builds nothing and allocates nothing, and a
        step of a quiet run (`_go_quiet`) only counts itself."""
        if optimizer is not None and id(optimizer) != self.primary_optimizer and not self._is_primary(optimizer):
            if self.detailed:
                self.step_calls[2] += 1
            return
        index = self.steps_seen
        self.steps_seen = index + 1
        if index < self.quiet_until:
            return
        comm = self.comm
        comm_busy = comm.spans or comm.events
        woke = self.quiet_until != 0
        if woke:  # this step's clock started with the quiet run's: passed over too
            self.clock.totals["sync"] += self._catch_up(index)  # the run's reads, for the sums
            if comm_busy:
                comm.take()  # all-reduces of a DDP made during the quiet run: several steps' worth
        if woke or (index >= self.settled_at and not self.events and not comm_busy and not self.measured.wants()
                    and not self._detail_wanted() and not self._plotting()):
            self.measured.skip()
            if (sample := self._detail_sample()) is not None:
                sample.skip()
            self.clock.drop_step()
            self.step_syncs = self.step_h2d = 0
            if self.detailed:  # the per-call hooks count nothing on the other steps: nothing to zero
                self.step_calls = [0, 0, 0, 0, 0, 0]
                self.step_anomaly_s = 0.0
        else:
            wall, phases = self.clock.end_step()
            if comm_busy:
                self._comm_step(phases)
            syncs, self.step_syncs = self.step_syncs, 0
            h2d, self.step_h2d = self.step_h2d, 0
            calls, self.step_calls = self.step_calls, [0, 0, 0, 0, 0, 0]
            anomaly, self.step_anomaly_s = self.step_anomaly_s, 0.0
            self._keep_step(StepRecord(index, wall, phases, syncs, h2d, detailed=self.detailed,
                                       micro_batches=_micro_batches(calls) if self.detailed else None,
                                       model_calls=(calls[3], calls[4], calls[5]) if self.detailed else None,
                                       anomaly_s=anomaly))
        if self.pending:
            self._drain_events()
        self._mode_left -= 1
        if self._mode_left <= 0:
            self._choose_detail()
        if index + 1 == self.settled_at:  # the steps from the next one are measured
            self._start_sums()
        if index >= self.settled_at and comm.backend is None and not self._plotting() and \
                not (self.detailed and self.device == "cuda"):
            self._go_quiet(index)
        self.clock.skip()  # this edge's own work (tens of us when it keeps a step) is not the next step's
        if self.max_steps is not None and self.steps_seen >= self.max_steps:
            raise StopWatching(f"stopped after {self.steps_seen} steps")

    def _detail_sample(self) -> Reservoir[StepRecord] | None:
        """The sample of detailed steps, if the step running now (or the quiet run) is detailed and
        there is one: the sample that step is offered to besides the step sample."""
        return self.detailed_steps if self.detailed else None

    def _detail_wanted(self) -> bool:
        """Whether the step that ends now is detailed and the sample of detailed steps keeps it."""
        sample = self._detail_sample()
        return sample is not None and sample.wants()

    def _plotting(self) -> bool:
        """Whether the step that starts now is kept for the per-step plots."""
        return self.detailed and len(self.plot_steps) < PLOT_STEPS

    def _go_quiet(self, index: int) -> None:
        """After step `index`: the steps from the next one that nothing will be asked of at their end -
        the sample passes over them, the detail mode stays, --steps is not reached - run quiet, up
        to QUIET_MAX of them: their end only counts them, and their host reads only go to the
        tally of their line. The step after a quiet run is passed over too (its reads are tallied
        the same way), and its end adds the whole run's data, h2d, sync (from the tallies) and
        checkpoint seconds to the clock's sums.

        Only without DDP, and on CUDA only between detailed runs: there no CUDA events or all-reduce
        spans come with a step (on CUDA the phase edges record events on detailed steps only, and a
        quiet run never outlasts the detail mode it starts in), so nothing can turn up during a
        quiet step that would have to be kept."""
        passes = self.measured.passes_over()
        if (sample := self._detail_sample()) is not None:
            passes = min(passes, sample.passes_over())
        until = index + min(passes, self._mode_left, QUIET_MAX)
        if self.max_steps is not None:
            until = min(until, self.max_steps - 1)
        if until > index + 1:
            self.quiet_until, self._quiet_from = until, index + 1
            self._quiet_read_s = self.syncs.time_reads(None)  # the reads only go to their line's tally

    def _catch_up(self, upto: int) -> float:
        """Count the quiet steps ended before step `upto` into the sample and the detail mode (at the
        step that ends the quiet run, or at stop()); returns the seconds the quiet run's reads took (0 if
        there was none)."""
        if not self.quiet_until:
            return 0.0
        quiet = upto - self._quiet_from
        self.measured.skip(quiet)
        if (sample := self._detail_sample()) is not None:  # a quiet run keeps its step's mode
            sample.skip(quiet)
        self._mode_left -= quiet
        self.quiet_until = 0
        return self.syncs.time_reads(self.read_span) - self._quiet_read_s

    def _quiet_so_far(self) -> int:
        """Steps of the current quiet run ended so far (not yet counted into the sample)."""
        return self.steps_seen - self._quiet_from if self.quiet_until else 0

    def _keep_step(self, record: StepRecord) -> None:
        events = self.events
        if events:
            self.events = []
        index = record.index
        if index < self.settled_at:
            was_open = self.window.prof is not None
            with self._profiler_edge():
                profiled = self.window.on_step_end(index, self.warmup, self.device == "cuda")
            if was_open != (self.window.prof is not None):
                # the window opened or closed just now, between two steps: torch.profiler's start, or its
                # stop and the reading of its trace (a second or more on CUDA) is no step's time
                self.clock.restart()
            if profiled:
                return  # steps under the profiler are left out of every statistic
        if index < self.warmup:
            self.warm.add(record)
            return
        self.measured.add(record)  # shares come from this uniform sample: no per-phase sums per step
        if record.detailed and self.detailed_steps is not None:
            self.detailed_steps.add(record)
        if record.detailed and len(self.plot_steps) < PLOT_STEPS:
            self.plot_steps.append(record)
        if events:
            self.pending.append((record, events))

    # -- torchrun ---------------------------------------------------------------------------------
    def _watch_destroy(self) -> None:
        """Gather every rank's summary just before the script tears its process group down."""
        try:
            import torch.distributed as dist
        except ImportError:
            return
        if not dist.is_available():
            return
        original = dist.destroy_process_group

        def destroy(group: Any = None) -> None:
            if group is None and not self._gather_done and this_rank() is not None:
                self._gather()
            original(group)

        dist.destroy_process_group = destroy

        def undo() -> None:
            dist.destroy_process_group = original

        self._undo_destroy = undo

    def _comm_medians(self) -> tuple[float | None, float | None, float | None]:
        steps = self.comm_steps.items
        if not steps:
            return None, None, None
        return (median(s.comm_s * 1e3 for s in steps), median(s.exposed_s * 1e3 for s in steps),
                median(float(s.nbytes) for s in steps))

    def _gather(self) -> None:
        from trainspeed.distributed.env import timeout_s

        self._gather_done = True
        place = this_rank()
        if place is None:
            return
        stat = rank_stat(place[0], self.measurements(gathering=True), self._comm_medians())
        try:
            seconds = min(timeout_s(), 120.0)
        except ValueError:
            seconds = 120.0
        self.gathered, note = gather(stat, seconds)
        if note:
            self.notes.append(note)

    def _dist_run(self, measured: WatchResult) -> DistRun | None:
        place = this_rank()
        if place is None and self.comm.world_size <= 1 and not self.comm_steps.items and self.gathered is None:
            return None
        rank, world = place if place is not None else (0, self.comm.world_size)
        world = max(world, self.comm.world_size)
        comm_ms, exposed_ms, nbytes = self._comm_medians()
        ranks = self.gathered or [rank_stat(rank, measured, (comm_ms, exposed_ms, nbytes))]
        notes: list[str] = []
        overlap = (1.0 - exposed_ms / comm_ms) if comm_ms and exposed_ms is not None and comm_ms > 0 else None
        # A rank that waits for a slower one sees that wait as all-reduce time: the transfer itself is
        # what the least-waiting rank measured, and a balanced job's compute the ranks' median busy time.
        timed = [r for r in ranks if r.comm_ms is not None and r.exposed_ms is not None and r.median_ms]
        bus = scaling_comm = scaling_exposed = compute = None
        if timed:
            least = min(timed, key=lambda r: r.exposed_ms or 0.0)
            scaling_comm, scaling_exposed = least.comm_ms, least.exposed_ms
            bus = bus_bandwidth_gbs(least.comm_bytes or 0.0, (least.comm_ms or 0.0) / 1e3, world)
            busy = sorted((r.median_ms or 0.0) - (r.exposed_ms or 0.0) for r in timed)
            compute = busy[len(busy) // 2]
        scaling: list[ScalePoint] = []
        if bus and compute and scaling_comm is not None and scaling_exposed is not None and measured.median_ms:
            backward = measured.phases["backward"].share * measured.median_ms
            scaling = predict(compute, backward, float(self.comm.grad_bytes or nbytes or 0), bus,
                              hidden_ms=scaling_comm - scaling_exposed)
        elif world < 2:
            notes.append("one rank: no all-reduce bandwidth to measure, so no scaling prediction; run with "
                         "--nproc-per-node 2 or more")
        return DistRun(world, self.comm.backend, rank, self.comm.grad_bytes, comm_ms, exposed_ms, overlap, bus,
                       ranks, scaling, notes)

    def _comm_step(self, phases: dict[str, float]) -> None:
        """Move this step's exposed all-reduce wait out of the phase the clock charged it to (host
        spans); on CUDA keep the steps whose device events have completed (the host did not wait)."""
        self.comm.end_step()
        counted = self.steps_seen >= self.warmup
        if counted:
            for done in self.comm.take_device():
                self.comm_steps.add(done)
        step = self.comm.take()
        if step is None:
            return
        if counted:
            self.comm_steps.add(step)
        inside = "backward" if self.detailed else "other"  # on edges-only steps backward is not split out
        moved = min(step.exposed_s, phases[inside])
        phases[inside] -= moved
        phases["comm"] += moved
        calls = self.clock.call_sums
        if self.detailed and calls is not None:  # the clock has summed this detailed step already
            calls[inside] -= moved

    def _choose_detail(self) -> None:
        """Detailed or edges-only for the step that starts now, and for how many steps (`_mode_left`)."""
        early = self.warmup + self.window.steps + DETAILED_FIRST - self.steps_seen
        if early > 0 or self.window.prof is not None or self.primary_optimizer is None or self.detail_every <= 1:
            detailed = True
            self._mode_left = early if early > 0 and self.primary_optimizer is not None else 1
        else:
            detailed = not self.detailed
            if detailed and not self.hooks.resumes_left():
                detailed = False  # edges only from here on: see hooks.RESUME_BUDGET
                self._mode_left = 1 << 62
                self.notes.append(f"detailed steps stopped at step {self.steps_seen}: this process has switched the "
                                  "per-call hooks as often as it may (Python 3.13+ stops caching a class's attribute "
                                  "lookups after 1 000 changes); the forward/backward/optimizer split comes from the "
                                  "steps before")
            else:
                block = DETAIL_BLOCK << (self._detail_runs // SWITCHES_PER_DOUBLING)
                self._detail_runs += detailed
                gap = block * (self.detail_every - 1)
                self._mode_left = block if detailed else self._detail_rng.randint(gap // 2, gap + gap // 2)
        if detailed != self.detailed:
            self.detailed = self.clock.detailed = detailed
            if detailed:
                self.hooks.resume()
            else:
                self.hooks.pause()
            self._set_edges()

    def _drain_events(self) -> None:
        while self.pending and self.pending[0][1][-1][2].query():
            record, events = self.pending.popleft()
            self._device_times(record, events)

    def _device_times(self, record: StepRecord, events: list[tuple[str, Any, Any]]) -> None:
        per_phase: dict[str, float] = collections.defaultdict(float)
        for phase, start, end in events:
            per_phase[phase] += start.elapsed_time(end)
        record.device_ms = dict(per_phase)
        for phase, ms in per_phase.items():
            self.device_ms[phase].add(ms)

    # -- the result ---------------------------------------------------------------------------
    def result(self) -> Any:
        """The doctor's result object: hardware, these measurements and the ranked verdicts."""
        from trainspeed.diagnose.report import diagnose_run

        return diagnose_run(self.measurements(), watcher=self)

    def measurements(self, gathering: bool = False) -> WatchResult:
        """The measurements so far (partial if the run stopped early)."""
        records = self.measured.items
        n = self.measured.seen + self._quiet_so_far()  # asked mid-run (a rank's summary): quiet steps too
        notes = self.notes + self.window.notes
        if not records and self.warm.items:  # a run too short to leave its warm-up: use what there is
            records = self.warm.items
            n = len(records)
            notes.append(f"only {self.steps_seen} steps: warm-up steps were used for the statistics")
        # data, h2d, sync and checkpoint from the clock's sums over every measured step, the split of
        # the rest from its sums over every detailed one; step times exact up to RESERVOIR_SIZE measured
        # steps, beyond that from the uniform sample; forward's, backward's, optimizer's and other's
        # median host times from the sample of detailed steps
        whole_run = records is self.measured.items
        summed = self.clock.summed() if whole_run else None
        shares, detailed = phase_shares(records, summed, self.clock.call_split() if whole_run else None)
        start_share = self.loader_start_s / summed[1] if summed is not None and summed[1] > 0 else None
        if whole_run and self.detailed_steps is not None and self.detailed_steps.items:
            detailed = self.detailed_steps.items
        phases = {}
        for p in PHASES:
            dev = median(self.device_ms[p].items) if p in self.device_ms and self.device_ms[p].items else None
            timed = records if p in EDGE_PHASES else detailed
            host = median(r.phases[p] for r in timed) if timed else None
            phases[p] = PhaseStat(host_ms=(host or 0.0) * 1e3, device_ms=dev, share=shares[p])
        step_ms = [r.wall_s * 1e3 for r in records]
        result = WatchResult(
            steps_seen=self.steps_seen, steps_measured=n,
            median_ms=median(step_ms), p90_ms=quantile(step_ms, 0.9),
            mean_ms=summed[1] * 1e3 / n if summed is not None and n and summed[1] > 0 else None,
            evaluation=self._evaluation(summed, n),
            phases=phases,
            syncs_per_step=(sum(r.syncs for r in records) / len(records)) if records else 0.0,
            h2d_bytes_per_step=(sum(r.h2d_bytes for r in records) / len(records)) if records else 0.0,
            ops_per_step=self.window.ops_per_step, kernels_per_step=self.window.kernels_per_step,
            flops_per_step=self.window.flops_per_step,
            other_ops_per_step=self.window.outside_ops_per_step, edge_ops_per_step=self.window.edge_ops_per_step,
            compiled=self.window.compiled,
            other_op_ms_per_step=self.window.outside_op_ms_per_step, op_times=self.window.op_times,
            op_ms_per_step=self.window.op_ms_per_step,
            loader_starts=self.loader_starts, loader_start_share=start_share,
            loader_start_ms=self.loader_start_s * 1e3 / self.loader_starts if self.loader_starts else None,
            sync_sites=self._sync_sites(), other_sites=self._other_sites(), loop_sites=self._loop_sites(),
            gpu_util=self._gpu_util(step_ms),
            device=self.device, batch_size=self.batch_size,
            loaders=[dataclasses.replace(info, batches=self.loader_batches[key]) for key, info in self.loaders.items()],
            torch_threads=torch.get_num_threads(), process_cpu_percent=self._cpu(),
            others_cpu_cores=machine_load.others_cores(self.load_from, self.load_to),
            peak_memory_bytes=self._peak_memory(), memory_capacity_bytes=self._capacity(),
            h2d_bytes_by_kind=dict(self.h2d_kinds), process_threads=self._threads(),
            step_samples=sorted(self.plot_steps, key=lambda r: r.index),
            step_times_ms=step_ms, notes=notes, gpu_busy_ms_per_step=self.window.gpu_busy_ms_per_step,
            micro_batches_per_step=median([r.micro_batches for r in detailed if r.micro_batches is not None]),
            model_calls_per_step=median([r.model_calls[0] for r in detailed if r.model_calls is not None]),
            model_calls_chained=median([r.model_calls[1] for r in detailed if r.model_calls is not None]),
            model_calls_after_read=median([r.model_calls[2] for r in detailed if r.model_calls is not None]),
            optimizer_changes=self.primary_changes, optimizers_built=self.optimizers_built,
            optimizer_build_ms=self.optimizer_build_s * 1e3 / self.optimizers_built if self.optimizers_built else None,
            optimizer=self._optimizer_info(),
            anomaly_ms_per_step=(sum(r.anomaly_s for r in detailed) * 1e3 / len(detailed)) if detailed else None,
        )
        if gathering:
            return result
        return dataclasses.replace(result, distributed=self._dist_run(result))

    def _evaluation(self, summed: tuple[dict[str, float], float] | None, measured: int) -> Evaluation | None:
        """The model.eval() spans, and the no_grad spans that called the model where they came at most every other
        step (a generator run under no_grad for a GAN's critic, an agent choosing its actions, come every step: work
        of the step, not an evaluation)."""
        kinds = [("model.eval()", self.evals)] if self.evals.count else []
        if self.quiet_evals.count and self.quiet_evals.count <= max(1, measured // 2):
            kinds.append(("no_grad", self.quiet_evals))
        if not kinds or summed is None or summed[1] <= 0:
            return None
        count = sum(spans.count for _, spans in kinds)
        seconds = sum(spans.seconds for _, spans in kinds)
        first, last = min(spans.first for _, spans in kinds), max(spans.last for _, spans in kinds)
        return Evaluation(count=count, mean_ms=seconds * 1e3 / count, share=min(1.0, seconds / summed[1]),
                          every_steps=(last - first) / (count - 1) if count > 1 else None,
                          by=" and ".join(name for name, _ in kinds))

    def _optimizer_info(self) -> OptimizerInfo | None:
        spec = self.optimizer_spec
        if spec is None:
            return None
        return OptimizerInfo(spec.cls.__name__, len(spec.shapes), sum(math.prod(s) for s in spec.shapes),
                             spec.foreach, spec.fused)

    def _sync_sites(self) -> list[SyncSite]:
        merged: dict[tuple[str, str], list[float]] = {}
        for where, op, count, seconds in self.syncs.sites():  # several instructions of one line merge
            entry = merged.setdefault((where, op), [0, 0.0])
            entry[0] += count
            entry[1] += seconds
        sites = [SyncSite(where, op, int(c), t * 1e3, source_of(where)) for (where, op), (c, t) in merged.items()]
        return sorted(sites, key=lambda s: s.total_ms, reverse=True)

    def _other_sites(self) -> list[OtherSite]:
        s = self.sampler
        if s is None or not s.other_total:
            return []
        inside: dict[str, tuple[str, int]] = {}
        for (site, library), count in s.other_inside.items():
            if count > inside.get(site, ("", 0))[1]:
                inside[site] = (library, count)
        return [OtherSite(site, source_of(site), count, count / s.other_total,
                          inside=inside[site][0] if site in inside and 2 * inside[site][1] >= count else None)
                for site, count in s.other_samples.most_common(10)]

    def _loop_sites(self) -> list[OtherSite]:
        s = self.sampler
        if s is None or not s.loop_total:
            return []
        return [OtherSite(site, source_of(site), count, count / s.loop_total)
                for site, count in s.other_loop.most_common(5)]

    def _gpu_util(self, step_ms: list[float]) -> GpuUtil:
        s = self.sampler
        if self.device != "cuda":
            return GpuUtil(False, None, 0, False, "the run did not use a CUDA device")
        if s is None or s.nvml is None:
            return GpuUtil(False, None, 0, False, (s.nvml_why if s else None) or "NVML unavailable")
        timeline = list(s.util)
        period = (median(step_ms) or 0.0) / 1e3
        saw, why = detect_sawtooth([u for _, u in timeline], [t for t, _ in timeline], period)
        mean = s.util_sum / s.util_n if s.util_n else None
        return GpuUtil(True, mean, s.util_n, saw, why, timeline[-2000:])

    def _cpu(self) -> float | None:
        s = self.sampler
        return (sum(s.cpu_percent) / len(s.cpu_percent)) if s and s.cpu_percent else None

    def _threads(self) -> int | None:
        s = self.sampler
        return max(s.threads) if s and s.threads else None

    def _peak_memory(self) -> int | None:
        if self.device == "cuda" and torch.cuda.is_initialized():
            return int(torch.cuda.max_memory_allocated(self.device_index))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(rss * (1 if sys.platform == "darwin" else 1024))  # Linux reports KiB

    def _capacity(self) -> int | None:
        if self.device == "cuda" and torch.cuda.is_initialized():
            return int(torch.cuda.get_device_properties(self.device_index).total_memory)
        return int(psutil.virtual_memory().total)


def _loader_key(iterator: Any) -> int:
    """A DataLoader iterator's loader, as the watcher keys it: by its dataset (each epoch's new iterator is the
    same loader's)."""
    return id(getattr(iterator, "_dataset", iterator))


def _has_parameters(module: torch.nn.Module) -> bool:
    return any(True for _ in module.parameters())


def _micro_batches(calls: list[int]) -> float:
    """Forward-and-backward passes per optimizer step: a step's outermost module calls (the model's, a
    loss module's) and backward calls, the fewer of the two (backward calls alone where no module is
    called), over the optimizer steps taken in it (the primary one's and those of other optimizers, a
    GAN's say). Above 1: gradients accumulated over micro-batches; a second loss's backward on one
    forward, or a forward for validation, are not."""
    forwards, backwards, other_steps = calls[:3]
    passes = min(forwards, backwards) if forwards else backwards  # a model of bare tensors has no module call
    return max(passes, 1) / (1 + other_steps)  # an LBFGS step runs its passes inside the optimizer


def phase_shares(records: list[StepRecord], sums: tuple[dict[str, float], float] | None = None,
                 split: dict[str, float] | None = None) -> tuple[dict[str, float], list[StepRecord]]:
    """Each phase's share of the wall time, and the detailed records.

    Edge phases (data, h2d, sync, checkpoint, comm) are timed on every step: their shares come from
    all records, or, for the phases in `sums` ((seconds per phase, wall seconds) summed over every
    measured step, as PhaseClock.summed() gives them), from those sums. What is left is split
    among forward, backward, optimizer and other in the proportions the detailed steps measured:
    `split` (seconds per phase summed over every detailed step, PhaseClock.call_split()), else the
    detailed records. Shares sum to 1.
    """
    detailed = [r for r in records if r.detailed] or list(records)
    wall = sum(r.wall_s for r in records)
    shares = dict.fromkeys(PHASES, 0.0)
    if wall <= 0:
        return shares, detailed
    for p in EDGE_PHASES:
        shares[p] = sum(r.phases[p] for r in records) / wall
    if sums is not None and sums[1] > 0:
        seconds, summed_wall = sums
        for p, s in seconds.items():
            shares[p] = s / summed_wall
    rest = max(0.0, 1.0 - sum(shares[p] for p in EDGE_PHASES))
    if split is None:
        split = {p: sum(r.phases[p] for r in detailed) for p in CALL_PHASES}
    total = sum(split.values())
    for p in CALL_PHASES:
        shares[p] = rest * split[p] / total if total > 0 else (rest if p == "other" else 0.0)
    return shares, detailed


def watch(warmup: int = 3, steps: int | None = None, profile_steps: int = 3, sample_hz: float = 50.0,
          detail_every: int = 32) -> Watcher:
    """Watch a training loop: `with trainspeed.watch() as w: ...` then `w.result()`."""
    return Watcher(warmup=warmup, steps=steps, profile_steps=profile_steps, sample_hz=sample_hz,
                   detail_every=detail_every)
