"""The watcher: hooks in, a phase clock, counters, a sampler, a short profiler window; measurements out.

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
import random
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch

from trainspeed.probe.optimizer import OptimizerSpec
from trainspeed.watch import collect, evaluation, frameworks, loaders, machine_load, made_at, optimizers, ranks, steps
from trainspeed.watch.autocast import autocast_dtype
from trainspeed.watch.comm import CommStep, CommTimer
from trainspeed.watch.evaluation import _Gap, _has_parameters, _Spans
from trainspeed.watch.gather import this_rank
from trainspeed.watch.hooks import Hooks
from trainspeed.watch.phases import EDGE_PHASES, PhaseClock
from trainspeed.watch.profile_window import ProfileWindow
from trainspeed.watch.result import (
    LoaderInfo,
    RankStat,
    StepRecord,
)
from trainspeed.watch.sampler import Sampler, loop_codes
from trainspeed.watch.stats import Reservoir
from trainspeed.watch.steps import StopWatching
from trainspeed.watch.syncs import SyncCounter, reading, site_of
from trainspeed.watch.trace import TraceStep, TracingClock

_W = TypeVar("_W", bound="Watcher")

DEVICE_PHASES = ("h2d", "forward", "backward", "optimizer")
"""Phases whose device time is taken with CUDA events (the others do no device work of their own)."""



def _first_tensor(args: tuple[Any, ...]) -> torch.Tensor | None:
    """The first tensor of a call's arguments, or of a dict among them (a batch of named tensors passed whole). A
    list of tensors is left alone: a detection model's list of images is a batch of one tensor per sample."""
    for a in args:
        if isinstance(a, torch.Tensor):
            return a
        if isinstance(a, dict):
            found = next((t for t in a.values() if isinstance(t, torch.Tensor)), None)
            if found is not None:
                return found
    return None

class Watcher:
    """Context manager that watches a training loop; `measurements()` returns a WatchResult.

    This class holds the watch's state, the hooks' entry points, the phase edges and the lifecycle; the rest of
    its methods live by subject in their own modules and are named below: the steps' ends (`steps`), the
    optimizers (`optimizers`), the DataLoaders (`loaders`), evaluations (`evaluation`), torchrun's ranks
    (`ranks`), and the measurements built at the end (`collect`). Verdicts are not its business:
    `trainspeed.doctor.Doctor` adds `result()`."""

    # the end of each step: kept, detailed, sampled or quiet (steps.py)
    step_ended = steps.step_ended
    _detail_sample = steps._detail_sample
    _detail_wanted = steps._detail_wanted
    _plotting = steps._plotting
    _go_quiet = steps._go_quiet
    _catch_up = steps._catch_up
    _quiet_so_far = steps._quiet_so_far
    _keep_step = steps._keep_step
    _choose_detail = steps._choose_detail
    _drain_events = steps._drain_events
    _device_times = steps._device_times
    # the optimizers: which one delimits the steps (optimizers.py)
    _is_primary = optimizers._is_primary
    _make_primary = optimizers._make_primary
    optimizer_built = optimizers.optimizer_built
    _rebase = optimizers._rebase
    _optimizer_info = optimizers._optimizer_info
    # the DataLoaders (loaders.py)
    loader_seen = loaders.loader_seen
    loader_batch = loaders.loader_batch
    loader_ran_out = loaders.loader_ran_out
    backward_running = steps.backward_running
    recomputed = steps.recomputed
    loader_started = loaders.loader_started
    # evaluations (evaluation.py)
    mode_set = evaluation.mode_set
    training_again = evaluation.training_again
    grad_off_entered = evaluation.grad_off_entered
    _grad_off_call = evaluation._grad_off_call
    _eval_call = evaluation._eval_call
    grad_off_left = evaluation.grad_off_left
    _evaluation = evaluation._evaluation
    # torchrun's ranks (ranks.py)
    _watch_destroy = ranks._watch_destroy
    _comm_medians = ranks._comm_medians
    _gather = ranks._gather
    _dist_run = ranks._dist_run
    _comm_step = ranks._comm_step
    # the measurements, built at the end (collect.py)
    measurements = collect.measurements
    _read_sites = collect._read_sites
    _other_sites = collect._other_sites
    _loop_sites = collect._loop_sites
    _gpu_util = collect._gpu_util
    _cpu = collect._cpu
    _threads = collect._threads
    _peak_memory = collect._peak_memory
    _capacity = collect._capacity
    _trace = collect._trace

    def __init__(self, warmup: int = 3, steps: int | None = None, profile_steps: int = 3,
                 sample_hz: float = 50.0, now: Callable[[], float] = time.perf_counter,
                 detail_every: int = 32, trace: bool = False) -> None:
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
        self.clock = TracingClock(now) if trace else PhaseClock(now)
        self.traced: dict[int, TraceStep] | None = {} if trace else None
        """With trace=True, the kept detailed steps' timelines by step index (watch/trace.py); else None."""
        self.hooks = Hooks(self)
        # the hot path calls the clock directly (one Python frame per phase edge, not two);
        # _set_edges() swaps in the versions that also record CUDA events
        self.enter = self.clock.enter
        self.exit = self.clock.exit
        self.syncs = SyncCounter(on_read=self._read_traced if trace else self.read_span)
        self._thread = threading.get_ident()
        self._measure_from_scratch(profile_steps)
        self.sampler: Sampler | None = None
        self.load_from: machine_load.LoadMark | None = None
        self.early_faults: list[tuple[int, int | None]] = []  # (steps seen, minor page faults): steps.early_faults
        self.load_to: machine_load.LoadMark | None = None
        """The machine's CPU counters as the measured steps started and as the watch stopped."""
        self.step_syncs = 0
        self.step_host_reads = 0
        """Reads of CPU tensors' values in the step running now: no synchronisation, timed in the phase they ran in."""
        self.step_h2d = 0
        self.step_timed = [0.0, 0.0]
        """Seconds the step running now spent formatting Python stacks for autograd's anomaly detection, and in
        module calls inside backward (activation checkpointing's recompute), on detailed steps."""
        self.step_calls = [0, 0, 0, 0, 0, 0]
        """[outermost module calls, backward calls, steps of optimizers other than the primary one, calls
        of the model, calls of the model given a tensor that autograd has recorded (the output of an
        earlier call: a recurrent cell stepped by hand), calls of the model after a host read since its
        last call (an agent acting in an environment on the action it read)] of the step running now,
        counted while the per-call hooks are in (detailed steps), outside the optimizer's step (an LBFGS
        closure)."""
        self._reads_at_call = 0
        """`step_syncs + step_host_reads` at the model's last call this step."""
        self.primary_optimizer: int | None = None
        self._primary_ref: weakref.ref[torch.optim.Optimizer] | None = None
        self._rival: tuple[int, int] | None = None
        """(id, steps seen) at the last step of an optimizer other than the primary one."""
        self.primary_changes = 0
        """Times another optimizer took over delimiting the steps (the primary one gone, or stopped)."""
        self.optimizers_built = 0
        """Optimizers constructed after the first step of one (a new optimizer every step)."""
        self.optimizer_build_s = 0.0
        self.framework: frameworks.Framework | None = None
        """The training framework that runs the loop (its frames on the stack of the first backward)."""
        self._framework_read = False
        self.made_at = made_at.MadeAt()
        self.saves = 0
        """Checkpoints in the whole run (warm-up included: a script's count); `saved` groups the calls."""
        self.save_calls = 0
        self._save_steps = (-1, -1)
        """Steps seen at the first and the last of them."""
        self._model_id = 0
        self.device = "cpu"
        self.opening_window = False
        """True while the profiler window opens or closes (torch.profiler synchronises the device then)."""
        self.device_index = 0
        self.batch_size: int | None = None
        self.autocast: str | None = None
        """The dtype of torch.autocast around a training call of the warm-up (None: none seen)."""
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
        self.window = ProfileWindow(profile_steps, outside=self._outside_phases, edge=self._in_edge_phase,
                                    keep_ops=self.traced is not None)
        if isinstance(self.clock, TracingClock):  # measuring starts over: so does the timeline
            self.traced = {}
            self.clock.recording = True
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
        """Evaluations with a model.eval() span (to model.train(), or until the model trains again), counted over
        the run and timed over the measured steps (`mode_set`)."""
        self._eval_from: tuple[float, int, weakref.ref[torch.nn.Module]] | None = None
        """(time, steps seen, the module) at the model.eval() that opened the evaluation under way."""
        self.quiet_evals = _Spans()
        """Evaluations without model.eval(): spans of torch.no_grad() or torch.inference_mode() entered outside every
        phase in which the model was called, with no step ended inside (`grad_off_entered`)."""
        self._eval_gap: _Gap | None = None
        """The evaluation under way: its spans so far, with no step since (`evaluation._span_ended`)."""
        self._grad_off: tuple[float, int] | None = None
        self._grad_off_called = False
        self._grad_off_hook: Any = None
        self._eval_called = False
        """The model (or the module put in evaluation mode) was called during the open model.eval() span."""
        self._eval_hook: Any = None

    # -- lifecycle --------------------------------------------------------------------------
    def start(self: _W) -> _W:
        self.syncs.__enter__()
        self.hooks.install()
        self.made_at.install()
        self.comm.install()
        self._watch_destroy()
        # sample 'other' only inside the loop (after the first step), never during setup; on steps
        # watched at their edges only, the sampler reads the phase from the stack (sampler.PHASE_FILES).
        # The wait on a DataLoader is sampled too, while data is the innermost phase (a slice: atomic)
        self.sampler = Sampler(lambda: self.steps_seen > 0 and not self.clock.stack,
                               hz=self.sample_hz,
                               in_data=lambda: self.steps_seen > 0 and self.clock.stack[-1:] == ["data"])
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
        self.load_from = machine_load.mark(loaders.worker_batches(self), self.steps_seen)
        if self.sampler is not None:
            self.sampler.learn_loop(loop_codes(sys._getframe(1)))

    def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        self.load_to = machine_load.mark(loaders.worker_batches(self), self.steps_seen) if self.load_from is not None else None
        if self.backward_boundary:  # the last step of a loop without an optimizer
            self.backward_boundary = False
            self.max_steps = None
            self.step_ended()
        self._catch_up(self.steps_seen)
        with self._profiler_edge():
            self.window.close()
        self.hooks.uninstall()
        self.made_at.uninstall()
        evaluation.closed(self)
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

    def __enter__(self: _W) -> _W:
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
            self.enter = self._enter_with_events
            self.exit = self._exit_with_events
        else:
            self.enter = self.clock.enter
            self.exit = self.clock.exit

    def forward_pre(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self.backward_boundary:  # no optimizer: the step that ended in backward closes here
            self.backward_boundary = False
            self.step_ended()
        if kwargs:  # model(**batch), as Hugging Face's Trainer calls it: the named inputs count as given
            args = args + tuple(kwargs.values())
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
                    if self.step_syncs + self.step_host_reads > self._reads_at_call:
                        calls[5] += 1
                self._reads_at_call = self.step_syncs + self.step_host_reads

    def _learn_call(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        """The model, its input, its device and the batch size, from the outermost module calls of the first steps."""
        first = _first_tensor(args)
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
        if self.batch_size is None and first.dim() > 0 and torch.is_grad_enabled():
            # a training call's: a validation pass run before training (Lightning's sanity check, under no_grad)
            # has its own batch size. A vector of floats is one sample's features (a policy called on one
            # observation), where a vector of integers is a batch of ids (an embedding's)
            one = first.dim() == 1 and first.is_floating_point()
            self.batch_size = 1 if one else int(first.shape[0])
        if self.autocast is None and torch.is_grad_enabled():
            self.autocast = autocast_dtype(first.device.type)

    def open_host(self, phase: str) -> int:
        """Open `phase` on the host clock alone (no CUDA events); returns the depth `close_host` takes."""
        depth = len(self.clock.stack)
        self.clock.enter(phase)
        return depth

    def close_host(self, depth: int) -> None:
        self.clock.leave(depth)


    def backward_done(self) -> None:
        """A backward call returned (counted). Without an optimizer, a backward ends a step - known only
        once the next forward (or backward) starts without an optimizer step in between."""
        if not self._framework_read:  # Lightning calls backward inside the optimizer's closure: before the return
            self._framework_read = True
            self.framework = frameworks.outermost(sys._getframe(1))
            if self.framework is not None:
                self.hooks.framework_checkpoints(self.framework.name)
        if self.clock.stack:  # inside another backward, a module's forward or an optimizer's step (LBFGS)
            return
        if self.primary_optimizer is None:
            if self.backward_boundary:
                self.step_ended()
            self.backward_boundary = True
        self.step_calls[1] += 1

    def saved(self) -> None:
        """A torch.save returned (its time is the checkpoint phase's). Saves with no training step between them are
        one checkpoint (Hugging Face's Trainer saves the optimizer, the scheduler, the RNG states and its arguments
        in four calls)."""
        self.save_calls += 1
        if self.saves and self._save_steps[1] == self.steps_seen:
            return
        self.saves += 1
        first = self._save_steps[0]
        self._save_steps = (self.steps_seen if first < 0 else first, self.steps_seen)

    def h2d(self, nbytes: int, pinned: bool, non_blocking: bool) -> None:
        """A tensor was copied to an accelerator. From the first such copy (`model.to(device)`, before the
        loop's first forward), reading a CPU tensor is no sync: it waits for no device's queue (a
        DataLoader's `randperm(n).tolist()` and seed `.item()`s at the loop's first `for`)."""
        if not self.syncs.device_only:
            self.syncs.count_device_reads_only()
        self.step_h2d += nbytes
        kind = ("pinned" if pinned else "pageable") + (", non_blocking" if non_blocking else "")
        self.h2d_kinds[kind] = self.h2d_kinds.get(kind, 0) + nbytes


    def _read_traced(self, op: str, t0: float, t1: float, frame: Any, host: bool = False) -> None:
        """`read_span`, and the read noted on the trace's timeline with its line (trace=True only)."""
        self.read_span(op, t0, t1, frame, host)
        if isinstance(self.clock, TracingClock):
            self.clock.read(op, site_of(frame), t0, t1, host)

    def read_span(self, op: str, t0: float, t1: float, frame: Any, host: bool = False) -> None:
        """A host read ran from t0 to t1 (the counter has tallied it by its line already): a read of a device
        tensor into the phase clock's sync; a read of a CPU tensor (`host`) is only counted, its time stays in
        the phase it ran in (it waited for nothing). Not called during a quiet run."""
        if host:
            self.step_host_reads += 1
            return
        self.clock.span("sync", t0, t1)
        self.step_syncs += 1

    def anomaly_stack(self, seconds: float) -> None:
        self.step_timed[0] += seconds

    def host_read(self, op: str, t0: float, t1: float, frame: Any) -> None:
        """A host read that the hooks saw (torch.cuda.synchronize) ran from t0 to t1, made by `frame`."""
        self.syncs.record(op, t0, t1, frame)

