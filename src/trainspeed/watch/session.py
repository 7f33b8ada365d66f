"""The watcher: hooks in, parts that own what they count, measurements out.

Steps are delimited by optimizer steps (torch.optim's global step hooks), or by backward calls when no optimizer is
used (`boundary.py`). The first `warmup` steps are left out of the statistics, and so are the `profile_steps` after
them, during which torch.profiler counts ops and kernels (and, on CUDA, times the GPU's own work). On CUDA each phase's
device span comes from CUDA events recorded at its edges on the detailed steps and read back only once they have
completed (event.query()): the watcher adds no synchronisation of its own.

`Watcher` builds one part per subject and joins their parts into a `WatchResult`. The hooks tell each event to the
part that owns it (`events.py`); the events several parts hear come here, and so does the step's end, which asks the
schedule what the next steps are and applies its answer. Each part owns its state (no other object writes it):

    hooks ──► Watcher ──┬─► PhaseEdges        the phase clock, CUDA events               edges.py, phases.py
    (hooks.py)          ├─► StepBoundary      which optimizer or backward ends a step    boundary.py
    events.py           ├─► StepSchedule      warm-up, window, detailed and quiet steps  schedule.py
                        ├─► StepCounts        what the step running now did              samples.py
                        ├─► StepSamples       the kept steps and their figures           samples.py
                        ├─► ProfileWindow     ops, FLOPs and kernels of a few steps      profile_window.py
                        ├─► HostReads         reads by line                              reads.py
                        ├─► ModelTracker      model, device, batch, autocast, h2d        model.py
                        ├─► OptimizerTracker  the primary optimizer as made, rebuilds    optimizers.py
                        ├─► LoaderTracker     DataLoaders, batches, starts               loaders.py
                        ├─► EvaluationTracker evaluations (counted here only)            evaluation.py
                        ├─► CheckpointTracker saves                                      checkpoints.py
                        ├─► FrameworkTracker  the training framework                     frameworks.py
                        ├─► RankTracker       DDP's, FSDP's comm; torchrun's ranks       ranks.py
                        ├─► MachineTracker    the workers' CPU, page faults, compiles    machine_load.py
                        ├─► LoadTracker       other processes, waits for a core          load/tracker.py
                        ├─► Sampler           stacks in "other" and data waits, NVML     sampler.py
                        └─► WindowTracker     --window's steps, and its closer             window.py
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from trainspeed.load.tracker import LoadTracker
from trainspeed.watch.boundary import Edge, StepBoundary
from trainspeed.watch.checkpoints import CheckpointTracker
from trainspeed.watch.edges import PhaseEdges
from trainspeed.watch.evaluation import EvaluationTracker
from trainspeed.watch.events import Events
from trainspeed.watch.hooks import Hooks
from trainspeed.watch.joined import joined
from trainspeed.watch.loaders import LoaderTracker
from trainspeed.watch.machine_load import MachineTracker
from trainspeed.watch.made_at import FrameworkTracker
from trainspeed.watch.model import ModelTracker
from trainspeed.watch.optimizers import OptimizerTracker
from trainspeed.watch.phases import EDGE_PHASES, PHASES
from trainspeed.watch.profile_window import ProfileWindow
from trainspeed.watch.ranks import RankTracker
from trainspeed.watch.reads import HostReads
from trainspeed.watch.result import StepRecord, WatchResult
from trainspeed.watch.sampler import Sampler
from trainspeed.watch.samples import StepCounts, StepSamples
from trainspeed.watch.schedule import StepSchedule, StopWatching
from trainspeed.watch.stacks import loop_codes
from trainspeed.watch.subject import RunSubject
from trainspeed.watch.syncs import reading, site_of
from trainspeed.watch.trace import TracingClock
from trainspeed.watch.warning_place import UserLineWarnings
from trainspeed.watch.window import WindowSpec, WindowTracker

_W = TypeVar("_W", bound="Watcher")


class Watcher:
    """Context manager that watches a training loop; `measurements()` returns a WatchResult. Verdicts are not its
    business: `trainspeed.doctor.Doctor` adds `result()`."""

    def __init__(self, warmup: int | None = None, steps: int | None = None, profile_steps: int = 3,
                 sample_hz: float = 50.0, now: Callable[[], float] = time.perf_counter,
                 detail_every: int = 32, trace: bool = False, window: WindowSpec | None = None,
                 on_close: Callable[[Watcher], None] | None = None, every: int = 0,
                 on_every: Callable[[Watcher], None] | None = None) -> None:
        self.on_close = on_close
        """Called as the window closes, the hooks out, while the script waits (the doctor's report)."""
        self.on_every = on_every
        """Called after every `every` steps, the hooks in (`--report-every`'s interim report)."""
        self._reporting = False
        self.run_window = run_window = WindowTracker(window, self._close_window)
        self.closer = run_window.closer
        self.edges = PhaseEdges(now, trace)
        self.clock = clock = self.edges.clock
        self.schedule = schedule = StepSchedule(warmup, window.steps if window is not None and window.start == 0
                                                else steps, profile_steps, detail_every)
        schedule.report_every(every if on_every is not None else 0)
        self.boundary = StepBoundary()
        self.counts = StepCounts()
        self.samples = StepSamples(detail_every, traced=trace)
        self.window = self._new_window()
        self.reads = HostReads()
        self.warnings = UserLineWarnings()  # the user's warnings at the user's lines, through the wrappers
        self.ranks = RankTracker(self.edges)
        self.machine = MachineTracker()
        self.load = LoadTracker(PHASES)
        self.model = model = ModelTracker()
        self.optimizers = OptimizerTracker()
        self.loaders = LoaderTracker()
        self.checkpoints = CheckpointTracker()
        self.frameworks = FrameworkTracker()
        self.evaluation = evaluation = EvaluationTracker(clock, lambda: schedule.seen, lambda: model.model_id)
        # sample 'other' only inside the loop (after the first step), never during setup; on steps watched at their
        # edges only, the sampler reads the phase from the stack (stacks.PHASE_FILES). The wait on a DataLoader is
        # sampled too, while data is the innermost phase (a slice: atomic)
        self.sampler = Sampler(lambda: schedule.seen > 0 and not clock.stack and not evaluation.evaluating
                               and not run_window.before and not self._reporting,
                               hz=sample_hz, in_data=lambda: schedule.seen > 0 and clock.stack[-1:] == ["data"],
                               cores=self.load.cores)
        self.hooks = Hooks(self._events(), self.edges)
        self.reads.bind(self._read_traced if trace else self._read)

    def _events(self) -> Events:
        """Who hears each of the hooks' events: the part that owns it, or this watcher where several do."""
        clock, counts, evaluation, loaders = self.clock, self.counts, self.evaluation, self.loaders
        return Events(
            step_ended=self.step_ended, forward_pre=self.forward_pre, backward_done=self.backward_done, h2d=self.h2d,
            saved=self.saved, loader_seen=self.loader_seen, loader_batch=loaders.first_batch,
            loader_ran_out=loaders.ran_out, loader_started=self.loader_started, host_read=self.reads.host_read,
            anomaly_stack=counts.anomaly, backward_running=lambda: clock.stack[-1:] == ["backward"],
            recomputed=counts.recomputed, optimizer_built=self.optimizers.optimizer_built,
            optimizer_faulted=self.optimizers.optimizer_faulted,
            mode_set=self.mode_set, grad_off_entered=evaluation.grad_off_entered,
            grad_off_left=evaluation.grad_off_left, evaluating=lambda: evaluation.evaluating,
            cell_called=self.cell_called, sequence_called=self.model.sequence_called,
            opening_window=lambda: self.window.opening)

    def _new_window(self) -> ProfileWindow:
        clock = self.clock
        return ProfileWindow(self.schedule.profile_steps, outside=self._outside_phases, edge=self._in_edge_phase,
                             keep_ops=isinstance(clock, TracingClock), phase=lambda: clock.active,
                             waits_count=lambda: self.load.threads_waited())

    # -- lifecycle --------------------------------------------------------------------------
    def start(self: _W) -> _W:
        self.warnings.install()
        self.reads.start()
        self.hooks.install()
        self.frameworks.install()
        self.ranks.install(lambda: self.measurements(gathering=True))
        self.sampler.start()
        self.load.watch(self.clock)  # this is the training thread: its run-queue wait, per phase
        self.clock.end_step()  # the first step starts now
        if self.run_window.before:  # before the window: reads tallied by line, not timed
            self.reads.go_quiet()
        elif self.schedule.settled_at == 0:
            self._measuring_starts()
        return self

    def _measuring_starts(self) -> None:
        """The measured steps start now: their sums, and the machine's load beside them. Called at a step's
        end (or backward's), under the training loop's frames: the sampler learns them here."""
        self.clock.start_sums()
        self.machine.measuring(self.loaders.worker_batches(), self.schedule.seen)
        self.load.measuring(self.schedule.seen)
        self.sampler.learn_loop(loop_codes(sys._getframe(1)))

    def stop(self) -> None:
        self.closer.disarm()
        if not self.hooks.live:
            return
        seen = self.schedule.seen
        self.machine.stopped(self.loaders.worker_batches(), seen)
        self.load.stopped(seen)
        if self.boundary.take():  # the last step of a loop without an optimizer
            self.schedule.last()
            self.step_ended()
        self._steps_stopped()
        self.hooks.uninstall()
        self.frameworks.uninstall()
        self.evaluation.closed()
        self.ranks.uninstall()
        self.reads.stop()
        self.warnings.uninstall()
        self.sampler.stop()
        self.samples.drain_all()
        self.load.close()

    def _steps_stopped(self) -> None:
        """The device's backlog is timed (the work the host had queued), the quiet run is counted, the profiler
        window closes."""
        if self.schedule.cuda and torch.cuda.is_available() and torch.cuda.is_initialized():
            now = self.clock.now
            t0 = now()
            torch.cuda.synchronize()
            self.samples.backlogged(now() - t0)
        if self.schedule.woke():
            self._wake(self.schedule.seen)
        self.window.close()

    def __enter__(self: _W) -> _W:
        return self.start()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        self.stop()
        return exc_type is StopWatching  # --steps reached: end quietly

    # -- a step's end ------------------------------------------------------------------------------
    def step_ended(self, optimizer: torch.optim.Optimizer | None = None, *hook_args: Any) -> None:
        """A step ended. torch's global optimizer post hook calls this directly (with the optimizer, the step's args
        and kwargs): the primary optimizer's steps delimit the steps (`StepBoundary`), another's is counted in the
        step. Without an optimizer, the watcher calls it with none as a backward closes a step.

        Runs once per step, between the user's torch work, where its code and data have gone cold: a step of a
        quiet run only counts itself, and one the samples pass over builds nothing and allocates nothing."""
        if self.closer.armed:  # the window is full: it closes at the script's next call of its step work
            return
        if optimizer is not None and id(optimizer) != self.boundary.primary and \
                self._optimizer_edge(optimizer) is Edge.INSIDE:
            if self.schedule.detailed:
                self.counts.other_step()
            return
        if self.evaluation.opened is not None:
            self.evaluation.training_again(False)
        index = self.schedule.step()
        if self.run_window.before:
            self._before_window(index)
            return
        if index < self.schedule.quiet_until:
            return
        self._step_end(index)

    def _before_window(self, index: int) -> None:
        """Step `index` ended before the window (`window.py`): counted only, edges only once an optimizer ends steps."""
        if self.boundary.by_optimizer and not self.hooks.paused:
            self._detail(False)
        if self.run_window.opens_with(index + 1):
            self._open_window(index + 1)

    def _open_window(self, at: int) -> None:
        """The window opens with the step starting now, the run's step `at`: everything is measured anew, as from a
        run's first step (the reads tallied before it, the saves and the clock's time since the start left out)."""
        steps = self.run_window.open(at)
        self.reads.wake()
        self.reads.count_from_now()
        self.checkpoints = CheckpointTracker()
        self._measure_anew()
        self.schedule.stop_after(steps)
        self._detail(True)
        self.clock.drop_step()  # the window's first step starts now

    def _close_window(self) -> None:
        """The closer fired: every hook out, as at a run's end, then `on_close` (the script waits for it)."""
        self.run_window.closing(self.schedule.seen)
        self.stop()
        if self.on_close is not None:
            self.on_close(self)

    def _step_end(self, index: int) -> None:
        """Step `index` ended and is no quiet step: kept or passed over, and the steps after it scheduled."""
        schedule, samples, clock, ranks = self.schedule, self.samples, self.clock, self.ranks
        if index == 0:
            self.run_window.first_step_ended(clock.now())
        detailed = schedule.detailed
        comm_busy = ranks.busy()
        woke = schedule.woke()
        if woke:  # this step's clock started with the quiet run's: passed over too
            clock.add("sync", self._wake(index))  # the run's reads, for the sums
            if comm_busy:
                ranks.passed_over()
        if woke or (index >= schedule.settled_at and not self.edges.events and not comm_busy
                    and not samples.wants(detailed)):
            samples.pass_over(detailed)
            clock.drop_step()
            self.counts.dropped(detailed)
        else:
            wall, phases = clock.end_step()
            if index == 0 and schedule.long_first(phases["forward"] + phases["backward"] + phases["optimizer"]):
                self.window.profile(schedule.profile_steps)
            if comm_busy:
                self._comm_step(phases, index)
            meter = self.load.meter
            self._keep(self.counts.record(index, wall, phases, detailed, self.boundary.by_optimizer,
                                          meter.last if detailed and meter is not None else None))
        samples.clocked_at(index, clock.step_started)
        if samples.pending:
            samples.drain()
        if (mode := schedule.next_mode(self.boundary.by_optimizer, self.window.open)) is not None:
            self._detail(mode)
        if index < schedule.settled_at and (index == 0 or index + 1 == schedule.opens_at):
            self.machine.early(index + 1)
        if index + 1 == schedule.settled_at:  # the steps from the next one are measured
            self._measuring_starts()
        if index >= schedule.settled_at and ranks.quiet_allowed() and not samples.plotting(schedule.detailed) and \
                not (schedule.detailed and schedule.cuda) and schedule.go_quiet(index, samples.passes_over(
                    schedule.detailed)):
            self.reads.go_quiet()  # the quiet run's reads only go to their line's tally
        clock.skip()  # this edge's own work (tens of us when it keeps a step) is not the next step's
        if self.run_window.full(clock.now(), schedule.reached()):  # reads after this step's end are not the window's
            self.reads.freeze()
            self.closer.arm()
            return
        if schedule.due(index) and self.on_every is not None:
            self._reporting = True  # no stack sampled meanwhile: the report's frames are no phase's
            try:
                self.on_every(self)
            finally:
                self._reporting = False
                clock.restart()  # the report's time is no step's
        if schedule.reached():
            raise StopWatching(f"stopped after {schedule.seen} steps")

    def _wake(self, upto: int) -> float:
        """The quiet run ends before step `upto`: the samples pass over its steps, and its reads are handed on again;
        the seconds they took."""
        self.samples.pass_over(self.schedule.detailed, self.schedule.quiet_steps(upto))
        return self.reads.wake()

    def _keep(self, record: StepRecord) -> None:
        """A step's record into the samples, with its CUDA events; not a step under the profiler window (left out of
        every statistic)."""
        events = self.edges.take_events() if self.edges.events else []
        index = record.index
        if index < self.schedule.settled_at and self._window_step(index):
            return
        if self.samples.keep(record, events, warm=index < self.schedule.warmup) and \
                isinstance(self.clock, TracingClock):  # trace=True: its timeline, until the plots are full
            self.samples.keep_trace(self.clock.take_step(index))
            if self.samples.plots_full:
                self.clock.record(False)

    def _window_step(self, index: int) -> bool:
        """Step `index` ended before the measured steps: the profiler window opens or closes after it (torch.profiler's
        start, or its stop and the reading of its trace, a second or more on CUDA, is no step's time); whether it ran
        under the window."""
        window = self.window
        was_open = window.open
        profiled = window.on_step_end(index, self.schedule.opens_at, self.schedule.cuda)
        if was_open != window.open:
            self.clock.restart()
            self.load.ops_known(window.op_lengths)  # how long each phase's ops run: its waits' joining
        return profiled

    def _detail(self, detailed: bool) -> None:
        """The steps from now on are detailed (the per-call hooks in, the clock splitting forward, backward and the
        optimizer out; on CUDA, events at the edges), or edges-only."""
        self.clock.set_detailed(detailed)
        if detailed:
            self.hooks.resume()
        else:
            self.hooks.pause()
        if self.schedule.cuda:
            self.edges.events_on(detailed)

    def _comm_step(self, phases: dict[str, float], index: int) -> None:
        """Move this step's exposed all-reduce wait out of the phase the clock charged it to (host spans)."""
        inside = "backward" if self.schedule.detailed else "other"  # on edges-only steps backward is not split out
        moved = self.ranks.step_ended(phases[inside], counted=index + 1 >= self.schedule.warmup)
        if moved:
            phases[inside] -= moved
            phases["comm"] += moved
            self.clock.move_summed(inside, moved)  # the clock has summed this detailed step already

    def _optimizer_edge(self, optimizer: torch.optim.Optimizer) -> Edge:
        """An optimizer other than the primary one stepped: what its step is to the watched steps. Each class seen
        stepping has its whole step timed from then on (Hooks.watch_optimizer); the first optimizer's first step ends
        the backward-delimited steps before it (`_measure_anew`)."""
        self.hooks.watch_optimizer(type(optimizer))
        seen = self.schedule.seen
        edge = self.boundary.optimizer_stepped(optimizer, seen)
        if edge is not Edge.INSIDE:
            self.optimizers.primary_is(optimizer)
        if edge is Edge.FIRST:
            self.boundary.backwards_before(seen)
            if seen:  # the first optimizer step came after steps delimited by backward calls
                self._measure_anew()
        return edge

    def _measure_anew(self) -> None:
        """Everything is measured again from the step ending now, which becomes step 0 - warm-up, the profiler window,
        the samples and --steps' count, the loaders' starts, the evaluations, the all-reduces, the clock's sums and the
        sampler's 'other' lines too."""
        self.window.close()
        self.schedule.restart()
        self.window = self._new_window()
        self.samples = StepSamples(self.schedule.detail_every, traced=isinstance(self.clock, TracingClock))
        if isinstance(self.clock, TracingClock):  # measuring starts over: so does the timeline
            self.clock.record(True)
        self.loaders.restart()
        self.evaluation.restart()
        self.ranks.restart()
        self.clock.forget_sums()
        if self.schedule.settled_at == 0:
            self._measuring_starts()
        self.sampler.forget_other()

    # -- the events several parts hear -----------------------------------------------------------
    def forward_pre(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self.boundary.pending and self.boundary.take():  # no optimizer: the step that ended in backward closes here
            self.step_ended()
        if kwargs:  # model(**batch), as Hugging Face's Trainer calls it: the named inputs count as given
            args = args + tuple(kwargs.values())
        model = self.model
        if (model.model is None or self.schedule.seen <= self.schedule.warmup) and model.learn(module, args):
            self.on_cuda()
        if id(module) == model.model_id and torch.is_grad_enabled():
            self.window.pass_begins()
        if len(self.clock.stack) == 1:  # not inside an optimizer's step (an LBFGS closure)
            self.counts.module_called(id(module) == model.model_id, args)
        elif id(module) == model.model_id:
            self.counts.closure_called()

    def mode_set(self, module: torch.nn.Module, training: bool) -> None:
        """A module's mode was set. A `model.eval()` after a backward that ends a step without an optimizer ends that
        step first: the evaluation that follows is no part of it (its first forward would end it inside)."""
        if not training and self.boundary.pending and self.boundary.take():
            self.step_ended()
        self.evaluation.mode_set(module, training)

    def on_cuda(self) -> None:
        """The run is on a CUDA device: reads of CPU tensors are no syncs, edges record events, NVML is sampled."""
        self.reads.device_seen()
        self.schedule.on_cuda()
        self.edges.events_on(self.schedule.detailed)
        self.sampler.gpu.want(self.model.device_index)

    def backward_done(self) -> None:
        """A backward call returned (counted). Without an optimizer, a backward ends a step - known only once the
        next forward (or backward) starts without an optimizer step in between."""
        if not self.frameworks.read:  # Lightning calls backward inside the optimizer's closure: before the return
            found = self.frameworks.backward_seen(sys._getframe(1))
            if found is not None:
                self.hooks.framework_checkpoints(found.name)
        if self.clock.stack:  # inside another backward, a module's forward or an optimizer's step (LBFGS)
            return
        if not self.boundary.by_optimizer:
            if self.boundary.take():
                self.step_ended()
            self.boundary.mark()
        self.counts.backward_called()

    def saved(self) -> None:
        """A torch.save returned (its time is the checkpoint phase's)."""
        self.checkpoints.saved(self.schedule.seen)

    def h2d(self, nbytes: int, pinned: bool, non_blocking: bool) -> None:
        """A tensor was copied to an accelerator. From the first such copy (`model.to(device)`, before the
        loop's first forward), reading a CPU tensor is no sync: it waits for no device's queue (a
        DataLoader's `randperm(n).tolist()` and seed `.item()`s at the loop's first `for`)."""
        self.reads.device_seen()
        self.counts.copied(nbytes)
        self.model.copied(nbytes, pinned, non_blocking)

    def cell_called(self, module: torch.nn.Module) -> None:
        if self.model.cell_called(module):
            self.counts.cell_called()

    def loader_seen(self, iterator: Any) -> bool:
        if self.evaluation.opened is not None:
            self.evaluation.training_again(True)
        if not self.evaluation.evaluating:
            self.counts.batch_taken()
        return self.loaders.seen(iterator, self.evaluation.evaluating)

    def loader_started(self, seconds: float, stop: bool = False) -> None:
        self.loaders.started(seconds, self.clock.summing, stop)

    def _read(self, op: str, t0: float, t1: float, frame: Any, host: bool = False) -> None:
        """A host read ran from t0 to t1 (the counter has tallied it by its line already): a read of a device
        tensor into the phase clock's sync; a read of a CPU tensor (`host`) is only counted, its time stays in
        the phase it ran in (it waited for nothing). Not called during a quiet run."""
        if not host:
            self.clock.span("sync", t0, t1)
        self.counts.read(host)

    def _read_traced(self, op: str, t0: float, t1: float, frame: Any, host: bool = False) -> None:
        """A read handed to the steps, and noted on the trace's timeline with its line (trace=True only)."""
        self._read(op, t0, t1, frame, host)
        if isinstance(self.clock, TracingClock):
            self.clock.read(op, site_of(frame), t0, t1, host)

    def _outside_phases(self) -> bool:
        """Whether an op dispatched now runs in "other": on the thread that runs the steps, with no phase
        open and no host read under way (a read's op is the sync phase's)."""
        return not self.clock.stack and threading.get_ident() == self.hooks.home and not reading()

    def _in_edge_phase(self) -> bool:
        """Whether an op dispatched now (not in "other") runs in an edge phase: on the thread that runs the steps,
        in a host read or with data, h2d, sync, checkpoint or comm open innermost."""
        stack = self.clock.stack
        return threading.get_ident() == self.hooks.home and (reading() or bool(stack) and stack[-1] in EDGE_PHASES)

    # -- the result ------------------------------------------------------------------------------
    def subject(self) -> RunSubject:
        """What the doctor's probes after the run copy the shapes of (`trainspeed.measure`)."""
        model, opts = self.model, self.optimizers
        return RunSubject(model.model, model.input_spec, opts.kind, opts.spec, self.loaders.probe_items(),
                          model.batch_dim)

    def measurements(self, gathering: bool = False) -> WatchResult:
        """The measurements so far (partial if the run stopped early): the parts, joined (`joined.py`)."""
        return joined(self, gathering)
