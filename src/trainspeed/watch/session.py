"""The watcher: hooks in, trackers that own what they count, measurements out.

Steps are delimited by optimizer steps (torch.optim's global step hooks), or by backward calls
when no optimizer is used. The first `warmup` steps are left out of the statistics, and so are
the `profile_steps` after them, during which torch.profiler counts ops and kernels (and, on CUDA,
times the GPU's own work). On CUDA each phase's device span comes from CUDA events recorded at its
edges on the detailed steps and read back only once they have completed (event.query()): the
watcher adds no synchronisation of its own.

`Watcher` is a dispatcher: it builds one tracker per subject, routes each event the hooks send to the trackers
that need it, and assembles their parts into a `WatchResult`. Each tracker owns its state (no other object
writes it):

    hooks ──► Watcher ──┬─► PhaseEdges        the phase clock, CUDA events          edges.py
    (hooks.py)          ├─► StepTracker       steps: kept, sampled, detailed, quiet steps.py
                        ├─► HostReads         reads by line                         reads.py
                        ├─► ModelTracker      model, device, batch, autocast, h2d   model.py
                        ├─► OptimizerTracker  the primary optimizer, rebuilds       optimizers.py
                        ├─► LoaderTracker     DataLoaders, batches, starts          loaders.py
                        ├─► EvaluationTracker evaluations (counted here only)       evaluation.py
                        ├─► CheckpointTracker saves                                 checkpoints.py
                        ├─► FrameworkTracker  the training framework                frameworks.py
                        ├─► RankTracker       DDP's, FSDP's comm; torchrun's ranks  ranks.py
                        └─► MachineTracker    the machine's load, page faults       machine_load.py
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from trainspeed.watch import collect
from trainspeed.watch.checkpoints import CheckpointTracker
from trainspeed.watch.edges import PhaseEdges
from trainspeed.watch.evaluation import EvaluationTracker
from trainspeed.watch.frameworks import FrameworkTracker, unsupported_note
from trainspeed.watch.hooks import Hooks
from trainspeed.watch.loaders import LoaderTracker
from trainspeed.watch.machine_load import MachineTracker
from trainspeed.watch.model import ModelTracker
from trainspeed.watch.optimizers import OptimizerTracker
from trainspeed.watch.phases import EDGE_PHASES
from trainspeed.watch.ranks import RankTracker
from trainspeed.watch.reads import HostReads
from trainspeed.watch.result import WatchResult
from trainspeed.watch.run_queue import BUSY_WAIT, ThreadWait, process_wait_s, thread_wait
from trainspeed.watch.sampler import Sampler, loop_codes
from trainspeed.watch.steps import StepTracker, StopWatching
from trainspeed.watch.subject import RunSubject
from trainspeed.watch.syncs import reading, site_of
from trainspeed.watch.trace import TracingClock

_W = TypeVar("_W", bound="Watcher")


class Watcher:
    """Context manager that watches a training loop; `measurements()` returns a WatchResult. Verdicts are not its
    business: `trainspeed.doctor.Doctor` adds `result()`."""

    step_ended: Callable[..., None]

    def __init__(self, warmup: int = 3, steps: int | None = None, profile_steps: int = 3,
                 sample_hz: float = 50.0, now: Callable[[], float] = time.perf_counter,
                 detail_every: int = 32, trace: bool = False) -> None:
        self.sample_hz = sample_hz
        self.edges = PhaseEdges(now, trace)
        self.clock = self.edges.clock
        self.hooks = Hooks(self, self.edges)
        self.reads = HostReads()
        edges = self.edges
        self.ranks = RankTracker(lambda phase: edges.enter(phase), lambda phase: edges.exit(phase))
        self.machine = MachineTracker()
        self.model = ModelTracker()
        self.optimizers = OptimizerTracker()
        self.loaders = LoaderTracker()
        self.checkpoints = CheckpointTracker()
        self.frameworks = FrameworkTracker()
        self.evaluation = EvaluationTracker(self.clock, self._steps_seen, self._model_id)
        self.steps = StepTracker(warmup=warmup, max_steps=steps, profile_steps=profile_steps,
                                 detail_every=detail_every, edges=self.edges, reads=self.reads, ranks=self.ranks,
                                 hooks=self.hooks, machine=self.machine, optimizers=self.optimizers,
                                 evaluation=self.evaluation, delimits=self._is_primary,
                                 measuring_starts=self._measuring_starts, outside=self._outside_phases,
                                 in_edge=self._in_edge_phase)
        self.step_ended = self.steps.ended
        """The step edge (`StepTracker.ended`), which the hooks call directly: one Python frame per step."""
        self.reads.bind(self._read_traced if trace else self.steps.read_span)
        self._thread = threading.get_ident()
        self.sampler: Sampler | None = None
        self._thread_wait: ThreadWait | None = None
        self._waits_from: tuple[float, float | None] | None = None
        """(when, the process's threads' wait so far) as the watch started: the warm-up's wait (`_count_native_waits`)."""
        self.running = False

    def _steps_seen(self) -> int:
        return self.steps.steps_seen

    def _model_id(self) -> int:
        return self.model.model_id

    # -- lifecycle --------------------------------------------------------------------------
    def start(self: _W) -> _W:
        self.reads.start()
        self.hooks.install()
        self.frameworks.install()
        self.ranks.install(lambda: self.measurements(gathering=True))
        # sample 'other' only inside the loop (after the first step), never during setup; on steps
        # watched at their edges only, the sampler reads the phase from the stack (sampler.PHASE_FILES).
        # The wait on a DataLoader is sampled too, while data is the innermost phase (a slice: atomic)
        steps, clock = self.steps, self.clock
        evaluation = self.evaluation  # samples during an evaluation are its, not the training step's "other"
        self.sampler = Sampler(lambda: steps.steps_seen > 0 and not clock.stack and not evaluation.evaluating,
                               hz=self.sample_hz,
                               in_data=lambda: steps.steps_seen > 0 and clock.stack[-1:] == ["data"])
        self.sampler.start()
        self._thread_wait = thread_wait()  # this is the training thread: its run-queue wait, per phase
        if self._thread_wait is not None:
            reader = self._thread_wait
            self.clock.watch_waits(reader, lambda: reader.longest, reader.joint, lambda: reader.own)
            self._waits_from = (time.monotonic(), process_wait_s())  # the clock of the machine's marks
        self.clock.end_step()  # the first step starts now
        if self.steps.settled_at == 0:
            self._measuring_starts()
        self.running = True
        return self

    def _measuring_starts(self) -> None:
        """The measured steps start now: their sums, and the machine's load beside them. Called at a step's
        end (or backward's), under the training loop's frames: the sampler learns them here."""
        self.clock.start_sums()
        self.machine.measuring(self.loaders.worker_batches(), self.steps.steps_seen)
        self._count_native_waits()
        if self.sampler is not None:
            self.sampler.learn_loop(loop_codes(sys._getframe(1)))
            self.sampler.cores.reset()

    def _count_native_waits(self) -> None:
        """Where the process's threads waited for a core during the warm-up (BUSY_WAIT of its time or more), the
        phases' waits count its native threads' too (torch's intra-op threads): a read per thread at each edge of a
        detailed step, dear on a quiet machine's small steps, where nothing waits."""
        if self._thread_wait is None or self._waits_from is None:
            return
        t0, w0 = self._waits_from
        start = self.machine.start  # the measured steps' first mark, taken just now: the same counters
        w1, elapsed = (start.threads_wait_s, start.at - t0) if start is not None else (None, 0.0)
        if w0 is not None and w1 is not None and elapsed > 0 and (w1 - w0) / elapsed >= BUSY_WAIT:
            self._thread_wait.add_native()
        self._waits_from = None

    def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        steps = self.steps
        self.machine.stopped(self.loaders.worker_batches(), steps.steps_seen)
        if steps.take_boundary(last=True):  # the last step of a loop without an optimizer
            self.step_ended()
        steps.stopped()
        self.hooks.uninstall()
        self.frameworks.uninstall()
        self.evaluation.closed()
        self.ranks.uninstall()
        self.reads.stop()
        if self.sampler is not None:
            self.sampler.stop()
        steps.drain_all()
        if self._thread_wait is not None:
            self._thread_wait.close()

    def __enter__(self: _W) -> _W:
        return self.start()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        self.stop()
        return exc_type is StopWatching  # --steps reached: end quietly

    # -- routing: what the hooks tell, to the trackers that need it ------------------------------
    @property
    def opening_window(self) -> bool:
        """True while the profiler window opens or closes (torch.profiler synchronises the device then)."""
        return self.steps.opening_window

    def _is_primary(self, optimizer: torch.optim.Optimizer) -> bool:
        """Whether `optimizer`'s steps delimit the watched steps (`OptimizerTracker.delimits`). Each class seen
        stepping has its whole step timed from then on (Hooks.watch_optimizer); the first optimizer's first step
        ends the backward-delimited steps before it (`_rebase`)."""
        if type(optimizer) not in self.hooks.optimizer_classes:
            self.hooks.watch_optimizer(type(optimizer))
        first = self.optimizers.primary is None
        primary = self.optimizers.delimits(optimizer, self.steps.steps_seen)
        if first:
            backwards = self.steps.first_optimizer()
            if self.steps.steps_seen:
                self._rebase(backwards)
        return primary

    def _rebase(self, backwards: int) -> None:
        """The first optimizer step came after steps delimited by backward calls: everything is measured again
        from the step ending now (StepTracker.rebase), the loaders' starts, the evaluations, the all-reduces, the
        clock's sums and the sampler's 'other' lines too."""
        self.steps.rebase(backwards)
        self.loaders.restart()
        self.evaluation.restart()
        self.ranks.restart()
        self.clock.forget_sums()
        if self.steps.settled_at == 0:
            self._measuring_starts()
        if self.sampler is not None:
            self.sampler.forget_other()

    def forward_pre(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        steps = self.steps
        if steps.take_boundary():  # no optimizer: the step that ended in backward closes here
            self.step_ended()
        if kwargs:  # model(**batch), as Hugging Face's Trainer calls it: the named inputs count as given
            args = args + tuple(kwargs.values())
        model = self.model
        if (model.model is None or steps.steps_seen <= steps.warmup) and model.learn(module, args):
            self._on_cuda()
        if len(self.clock.stack) == 1:  # not inside an optimizer's step (an LBFGS closure)
            steps.module_called(id(module) == model.model_id, args)

    def _on_cuda(self) -> None:
        """The run is on a CUDA device: reads of CPU tensors are no syncs, edges record events, NVML is sampled."""
        self.reads.device_seen()
        self.steps.on_cuda()
        if self.sampler is not None:
            self.sampler.want_gpu(self.model.device_index)

    def backward_done(self) -> None:
        """A backward call returned (counted). Without an optimizer, a backward ends a step - known only once the
        next forward (or backward) starts without an optimizer step in between."""
        if not self.frameworks.read:  # Lightning calls backward inside the optimizer's closure: before the return
            found = self.frameworks.backward_seen(sys._getframe(1))
            if found is not None:
                self.hooks.framework_checkpoints(found.name)
        if self.clock.stack:  # inside another backward, a module's forward or an optimizer's step (LBFGS)
            return
        steps = self.steps
        if not steps.by_optimizer:
            if steps.take_boundary():
                self.step_ended()
            steps.mark_boundary()
        steps.backward_called()

    def saved(self) -> None:
        """A torch.save returned (its time is the checkpoint phase's)."""
        self.checkpoints.saved(self.steps.steps_seen)

    def h2d(self, nbytes: int, pinned: bool, non_blocking: bool) -> None:
        """A tensor was copied to an accelerator. From the first such copy (`model.to(device)`, before the
        loop's first forward), reading a CPU tensor is no sync: it waits for no device's queue (a
        DataLoader's `randperm(n).tolist()` and seed `.item()`s at the loop's first `for`)."""
        self.reads.device_seen()
        self.steps.copied(nbytes)
        self.model.copied(nbytes, pinned, non_blocking)

    def evaluating(self) -> bool:
        return self.evaluation.evaluating

    def cell_called(self, module: torch.nn.Module) -> None:
        self.model.cell_called(module)
        self.steps.counts.cells += 1

    def loader_seen(self, iterator: Any) -> bool:
        if self.evaluation.opened is not None:
            self.evaluation.training_again(True)
        return self.loaders.seen(iterator, self.evaluation.evaluating)

    def loader_batch(self, iterator: Any, batch: Any) -> None:
        self.loaders.first_batch(iterator, batch)

    def loader_ran_out(self, iterator: Any) -> None:
        self.loaders.ran_out(iterator)

    def loader_started(self, seconds: float, stop: bool = False) -> None:
        self.loaders.started(seconds, self.clock.summing, stop)

    def host_read(self, op: str, t0: float, t1: float, frame: Any) -> None:
        self.reads.host_read(op, t0, t1, frame)

    def anomaly_stack(self, seconds: float) -> None:
        self.steps.anomaly_stack(seconds)

    def backward_running(self) -> bool:
        return self.steps.backward_running()

    def recomputed(self, seconds: float) -> None:
        self.steps.recomputed(seconds)

    def optimizer_built(self, seconds: float) -> None:
        self.optimizers.optimizer_built(seconds)

    def mode_set(self, module: torch.nn.Module, training: bool) -> None:
        self.evaluation.mode_set(module, training)

    def grad_off_entered(self) -> None:
        self.evaluation.grad_off_entered()

    def grad_off_left(self) -> None:
        self.evaluation.grad_off_left()

    def _read_traced(self, op: str, t0: float, t1: float, frame: Any, host: bool = False) -> None:
        """A read handed to the steps, and noted on the trace's timeline with its line (trace=True only)."""
        self.steps.read_span(op, t0, t1, frame, host)
        if isinstance(self.clock, TracingClock):
            self.clock.read(op, site_of(frame), t0, t1, host)

    def _outside_phases(self) -> bool:
        """Whether an op dispatched now runs in "other": on the thread that runs the steps, with no phase
        open and no host read under way (a read's op is the sync phase's)."""
        return not self.clock.stack and threading.get_ident() == self._thread and not reading()

    def _in_edge_phase(self) -> bool:
        """Whether an op dispatched now (not in "other") runs in an edge phase: on the thread that runs the steps,
        in a host read or with data, h2d, sync, checkpoint or comm open innermost."""
        stack = self.clock.stack
        return threading.get_ident() == self._thread and (reading() or bool(stack) and stack[-1] in EDGE_PHASES)

    # -- the result ------------------------------------------------------------------------------
    def subject(self) -> RunSubject:
        """What the doctor's probes after the run copy the shapes of (`trainspeed.measure`)."""
        model, opts = self.model, self.optimizers
        return RunSubject(model.model, model.input_spec, opts.kind, opts.spec, self.loaders.probe_items())

    def measurements(self, gathering: bool = False) -> WatchResult:
        """The measurements so far (partial if the run stopped early): the trackers' parts, joined."""
        fig = collect.step_figures(self.steps)
        steps, s = self.steps, self.sampler
        model = self.model.part()
        if self.model.cell is not None and (fig.cell_calls_per_step or 0) >= 2:
            model = dataclasses.replace(model, cell_loop=dataclasses.replace(self.model.cell,
                                                                             calls_per_step=fig.cell_calls_per_step or 0.0))
        notes = steps.notes + self.ranks.notes + steps.window.notes
        framework = self.frameworks.part()
        too_old = unsupported_note(framework) if framework is not None else None
        if too_old is not None:
            notes.append(too_old)
        notes += fig.notes
        summed = fig.summed
        result = WatchResult(
            steps=fig.steps, phases=fig.phases, model=model,
            process=collect.process(s, model.device, self.model.device_index),
            gpu_util=collect.gpu_util(s, model.device, fig.steps.times_ms),
            window=steps.window.part(), reads=self.reads.part(), sites=collect.sites(s),
            optimizers=self.optimizers.part(), checkpoints=self.checkpoints.part(),
            loaders=self.loaders.part(summed[1] if summed is not None and summed[1] > 0 else None),
            machine=collect.machine(self.machine.part(), s), evaluation=self.evaluation.part(summed, fig.steps.measured),
            framework=framework, notes=notes, trace=collect.trace_of(steps, model.device))
        if gathering:
            return result
        return dataclasses.replace(result, distributed=self.ranks.part(result))
