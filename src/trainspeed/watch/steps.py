"""The steps of a watched run: which are kept, detailed, sampled or run quiet, what the step running now counted,
and the CUDA events read back once they have completed.

`StepTracker` owns all of it: the step count, the warm-up and the profiler window it settles after, the samples of
measured steps, the quiet runs and the detail schedule. It is told a step ended (`ended`), and what the step running
now did (a read, a copy, a module or backward call); it asks the other trackers for what it needs at a step's end.
"""

from __future__ import annotations

import collections
import contextlib
import random
from collections.abc import Callable, Iterator
from typing import Any

import torch

from trainspeed.watch.edges import DEVICE_PHASES, PhaseEdges
from trainspeed.watch.evaluation import EvaluationTracker
from trainspeed.watch.hooks import Hooks
from trainspeed.watch.machine_load import MachineTracker
from trainspeed.watch.optimizers import OptimizerTracker
from trainspeed.watch.profile_window import ProfileWindow
from trainspeed.watch.ranks import RankTracker
from trainspeed.watch.reads import HostReads
from trainspeed.watch.result import StepRecord
from trainspeed.watch.stats import Reservoir
from trainspeed.watch.step_counts import StepCounts
from trainspeed.watch.trace import TraceStep, TracingClock

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
torch.nn.Module's class (see patching.RESUME_BUDGET), grow only with the logarithm of the run's length."""

QUIET_MAX = 64
"""A quiet run lasts at most this many steps: the step after it adds the run's data, h2d, sync and
checkpoint seconds to the clock's sums, and a run the script ends inside is left out of them."""


class StopWatching(BaseException):
    """Raised from a hook when the requested number of steps is reached (BaseException, so a
    script's `except Exception` does not swallow it)."""


class StepTracker:
    """The steps: counted, sampled, detailed or quiet, and what each one did. One per watch."""

    def __init__(self, *, warmup: int, max_steps: int | None, profile_steps: int, detail_every: int,
                 edges: PhaseEdges, reads: HostReads, ranks: RankTracker, hooks: Hooks, machine: MachineTracker,
                 optimizers: OptimizerTracker, evaluation: EvaluationTracker,
                 delimits: Callable[[torch.optim.Optimizer], bool], measuring_starts: Callable[[], None],
                 outside: Callable[[], bool], in_edge: Callable[[], bool]) -> None:
        self.warmup, self.max_steps, self.detail_every = warmup, max_steps, detail_every
        self.edges, self.clock, self.reads, self.ranks, self.hooks, self.machine = \
            edges, edges.clock, reads, ranks, hooks, machine
        self._optimizers, self._evaluation = optimizers, evaluation
        self._delimits = delimits
        """Asked at an optimizer's step that is not the primary one's whether it delimits the steps after all (the
        watcher's `_is_primary`: the optimizer tracker's answer, and what follows from it)."""
        self._measuring_starts = measuring_starts
        """Called as the measured steps start (the clock's sums, the machine's load and the sampler's loop)."""
        self._outside, self._in_edge = outside, in_edge
        self.detailed = True
        """Whether the step running now is detailed. After the first DETAILED_FIRST measured steps, about one
        step in `detail_every` is detailed (every module call, backward and zero_grad timed): runs of
        DETAIL_BLOCK detailed steps separated by runs of edges-only steps of random length, so that no periodic
        pattern of the loop lines up with them. detail_every=1: every step detailed."""
        self._detail_rng = random.Random(7)
        self.quiet_until = 0
        """Steps with a lower index are quiet: their end only counts them, and their host reads go only
        to the tally of their line (so does the step that ends the quiet run, passed over too). 0: none."""
        self._quiet_from = 0
        self._quiet_read_s = 0.0
        self.cuda = False
        """The run is on a CUDA device (`on_cuda`)."""
        self.backlog_s = 0.0
        """Seconds the device took, once the watch stopped, to finish the work the host had queued (`stopped`)."""
        self.opening_window = False
        """True while the profiler window opens or closes (torch.profiler synchronises the device then)."""
        self.backward_boundary = False
        """Without an optimizer, a backward call ended the step running now: it closes at the next forward or
        backward, or at stop()."""
        self.counts = StepCounts()
        self._reads_at_call = 0
        """`syncs + host_reads` of the step running now at the model's last call."""
        self.pending: collections.deque[tuple[StepRecord, list[tuple[str, Any, Any]]]] = collections.deque(maxlen=256)
        self.notes: list[str] = []
        self.measure_from_scratch(profile_steps)

    def measure_from_scratch(self, profile_steps: int) -> None:
        """What is measured from the first step on: the step count, the profiler window and the warm-up it
        settles after, the samples and the detail schedule. Set at construction, and again when the first
        optimizer step comes after backward-delimited steps (`rebase`)."""
        clock = self.clock
        self.traced: dict[int, TraceStep] | None = None
        """With trace=True, the kept detailed steps' timelines by step index (watch/trace.py); else None."""
        if isinstance(clock, TracingClock):  # measuring starts over: so does the timeline
            self.traced = {}
            clock.recording = True
        self.window = ProfileWindow(profile_steps, outside=self._outside, edge=self._in_edge,
                                    keep_ops=self.traced is not None, phase=lambda: clock.active)
        self.settled_at = self.window.settled_from(self.warmup)
        self.steps_seen = 0
        self.first_end: float | None = None
        """When the first step ended (the clock's time): the training loop's time runs from there (`loop_seconds`)."""
        self._clocked = 0
        """The index of the last step whose end the clock read (`clock.step_started`)."""
        self.measured = Reservoir[StepRecord](seed=1)
        self.detailed_steps = Reservoir[StepRecord](seed=5) if self.detail_every > 1 else None
        """A uniform sample of the measured detailed steps alone: forward, backward and optimizer's median
        host times come from it (the step sample holds about one detailed step in `detail_every`).
        None when every step is detailed: the step sample is one of them."""
        self.warm = Reservoir[StepRecord](seed=2)
        self.plot_steps: list[StepRecord] = []
        self.device_ms = {p: Reservoir[float](seed=3) for p in DEVICE_PHASES}
        self._mode_left = 0
        self._detail_runs = 0

    def rebase(self, backwards: int) -> None:
        """The first optimizer step came after steps delimited by backward calls: those were the micro-batches of
        a step (gradients accumulated over several backward calls before the first `optimizer.step()`), or a
        stretch of the script before its training loop, not training steps. The step ending now becomes step 0
        and every step is measured again from it: warm-up, the profiler window, the samples and --steps' count
        (the watcher starts the other trackers over)."""
        self.notes.append(f"the first optimizer step came after {backwards} backward calls (micro-batches "
                          "accumulated before it): measured from that step on, as training steps")
        if self.window.prof is not None:
            with self.profiler_edge():
                self.window.close()
        self.measure_from_scratch(self.window.steps)
        self.pending.clear()

    def first_optimizer(self) -> int:
        """The first optimizer step is ending (the optimizer tracker has made it the primary one): the backward calls
        that delimited the steps until now (the last one's step had not ended)."""
        backwards = self.steps_seen + self.backward_boundary
        self.backward_boundary = False
        return backwards

    @property
    def by_optimizer(self) -> bool:
        """Steps are delimited by an optimizer's steps (else by backward calls): one has become the primary."""
        return self._optimizers.primary is not None

    def on_cuda(self) -> None:
        """The run turned out to be on a CUDA device: the detailed steps' phase edges record CUDA events."""
        self.cuda = True
        self.edges.events_on(self.detailed)

    @contextlib.contextmanager
    def profiler_edge(self) -> Iterator[None]:
        """The profiler window opens or closes inside: torch.profiler's own synchronize is not the script's."""
        self.opening_window = True
        try:
            yield
        finally:
            self.opening_window = False

    # -- what the step running now does -------------------------------------------------------------
    def read_span(self, op: str, t0: float, t1: float, frame: Any, host: bool = False) -> None:
        """A host read ran from t0 to t1 (the counter has tallied it by its line already): a read of a device
        tensor into the phase clock's sync; a read of a CPU tensor (`host`) is only counted, its time stays in
        the phase it ran in (it waited for nothing). Not called during a quiet run."""
        if host:
            self.counts.host_reads += 1
            return
        self.clock.span("sync", t0, t1)
        self.counts.syncs += 1

    def copied(self, nbytes: int) -> None:
        self.counts.h2d_bytes += nbytes

    def loop_seconds(self, median_ms: float | None) -> float | None:
        """The training loop's wall time so far: from the first step's end to the last one the clock read, a median
        step for each quiet step after it (their ends are not read), and one for the first step (its clock ran from
        the watch's start, the script's set-up in it), and on CUDA the work the device still had queued when the
        watch stopped (at the last step's end where --steps stopped it). None before two steps."""
        if self.first_end is None or self.steps_seen < 2 or median_ms is None:
            return None
        unread = self.steps_seen - 1 - self._clocked
        return self.clock.step_started - self.first_end + (1 + unread) * median_ms / 1e3 + self.backlog_s

    def module_called(self, is_model: bool, args: tuple[Any, ...]) -> None:
        """An outermost module call outside an optimizer's step (`is_model`: the model's), on a detailed step."""
        counts = self.counts
        counts.forwards += 1
        if not is_model:
            return
        counts.model_calls += 1
        reads = counts.syncs + counts.host_reads
        if counts.model_calls > 1:
            if any(isinstance(a, torch.Tensor) and a.grad_fn is not None for a in args):
                counts.chained += 1
            if reads > self._reads_at_call:
                counts.after_read += 1
        self._reads_at_call = reads

    def backward_called(self) -> None:
        self.counts.backwards += 1

    def anomaly_stack(self, seconds: float) -> None:
        self.counts.anomaly_s += seconds

    def backward_running(self) -> bool:
        """Whether backward is the innermost phase open: a module called now is called by autograd (activation
        checkpointing recomputing a segment's forward), not by the script."""
        return self.clock.stack[-1:] == ["backward"]

    def recomputed(self, seconds: float) -> None:
        """A module call inside backward took `seconds` (detailed steps: the call hooks are in)."""
        self.counts.recompute_s += seconds

    # -- a step's end --------------------------------------------------------------------------------
    def ended(self, optimizer: torch.optim.Optimizer | None = None, *hook_args: Any) -> None:
        """A step ended. torch's global optimizer post hook calls this directly (with the optimizer, the step's
        args and kwargs): the primary optimizer's steps delimit the steps (`OptimizerTracker`), another's is
        counted in the step. Without an optimizer, the watcher calls it with none as a backward closes a step.

        Runs once per step, between the user's torch work, where its code and data have gone cold:
        a settled step the uniform sample passes over builds nothing and allocates nothing, and a
        step of a quiet run (`_go_quiet`) only counts itself."""
        if optimizer is not None and id(optimizer) != self._optimizers.primary and not self._delimits(optimizer):
            if self.detailed:
                self.counts.other_steps += 1
            return
        if self._evaluation.opened is not None:
            self._evaluation.training_again(False)
        index = self.steps_seen
        self.steps_seen = index + 1
        if index < self.quiet_until:
            return
        comm_busy = self.ranks.busy()
        woke = self.quiet_until != 0
        if woke:  # this step's clock started with the quiet run's: passed over too
            self.clock.add("sync", self._catch_up(index))  # the run's reads, for the sums
            if comm_busy:
                self.ranks.passed_over()
        if woke or (index >= self.settled_at and not self.edges.events and not comm_busy and not self.measured.wants()
                    and not self._detail_wanted() and not self._plotting()):
            self.measured.skip()
            if (sample := self._detail_sample()) is not None:
                sample.skip()
            self.clock.drop_step()
            counts = self.counts
            counts.syncs = counts.host_reads = counts.h2d_bytes = 0
            if self.detailed:  # the per-call hooks count nothing on the other steps: nothing to zero
                self.counts = StepCounts()
        else:
            wall, phases = self.clock.end_step()
            if comm_busy:
                self._comm_step(phases)
            c, self.counts = self.counts, StepCounts()
            detailed = self.detailed
            self._keep_step(StepRecord(
                index, wall, phases, c.syncs, c.h2d_bytes, detailed=detailed,
                micro_batches=c.micro_batches() if detailed else None,
                model_calls=(c.model_calls, c.chained, c.after_read, c.cells) if detailed else None,
                anomaly_s=c.anomaly_s, recompute_s=c.recompute_s, host_reads=c.host_reads, waits=self.clock.step_waits,
                longest_waits=self.clock.step_longest, joint_waits=self.clock.step_joint,
                optimizer_steps=(1 + c.other_steps if self.by_optimizer else 0) if detailed else None))
        self._clocked = index  # the last step whose end the clock holds (a quiet step's is not read)
        if not index:
            self.first_end = self.clock.step_started  # where the loop's time starts (`loop_seconds`)
        if self.pending:
            self._drain_events()
        self._mode_left -= 1
        if self._mode_left <= 0:
            self._choose_detail()
        if index < self.settled_at and (index == 0 or index + 1 == self.window.opens_at(self.warmup)):
            self.machine.early(index + 1)
        if index + 1 == self.settled_at:  # the steps from the next one are measured
            self._measuring_starts()
        if index >= self.settled_at and self.ranks.quiet_allowed() and not self._plotting() and \
                not (self.detailed and self.cuda):
            self._go_quiet(index)
        self.clock.skip()  # this edge's own work (tens of us when it keeps a step) is not the next step's
        if self.max_steps is not None and self.steps_seen >= self.max_steps:
            raise StopWatching(f"stopped after {self.steps_seen} steps")

    def mark_boundary(self) -> None:
        """Without an optimizer, an outermost backward returned: it ends the step running now - known only once
        the next forward (or backward) starts without an optimizer step in between, or the watch stops."""
        self.backward_boundary = True

    def take_boundary(self, last: bool = False) -> bool:
        """Whether a backward's boundary is pending (the step it ended must end now); it is taken. `last`: the
        watch stops, and --steps no longer counts."""
        if not self.backward_boundary:
            return False
        self.backward_boundary = False
        if last:
            self.max_steps = None
        return True

    def stopped(self) -> None:
        """The watch stops: the device's backlog is timed (`backlog_s`), the quiet run is counted, the profiler
        window closes."""
        if self.cuda and torch.cuda.is_available() and torch.cuda.is_initialized():
            now = self.clock.now
            t0 = now()
            torch.cuda.synchronize()
            self.backlog_s = now() - t0
        self._catch_up(self.steps_seen)
        with self.profiler_edge():
            self.window.close()

    def drain_all(self) -> None:
        """The run is over: waiting for the device costs it nothing. Every pending step's device times."""
        for record, events in self.pending:
            events[-1][2].synchronize()
            self._device_times(record, events)
        self.pending.clear()

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
            self._quiet_read_s = self.reads.go_quiet()  # the reads only go to their line's tally

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
        return self.reads.wake() - self._quiet_read_s

    def quiet_so_far(self) -> int:
        """Steps of the current quiet run ended so far (not yet counted into the sample)."""
        return self.steps_seen - self._quiet_from if self.quiet_until else 0

    def _keep_step(self, record: StepRecord) -> None:
        events = self.edges.take_events()
        index = record.index
        if index < self.settled_at:
            was_open = self.window.prof is not None
            with self.profiler_edge():
                profiled = self.window.on_step_end(index, self.warmup, self.cuda)
            if was_open != (self.window.prof is not None):
                # the window opened or closed just now, between two steps: torch.profiler's start, or its
                # stop and the reading of its trace (a second or more on CUDA) is no step's time
                self.clock.restart()
                self.clock.op_lengths = self.window.op_lengths  # how long each phase's ops run: its waits' joining
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
            if self.traced is not None:
                self._keep_trace(record)
        if events:
            self.pending.append((record, events))

    def _keep_trace(self, record: StepRecord) -> None:
        """trace=True: keep the timeline of the step just kept for the plots; once they are full, the clock stops
        noting (the trace is bounded as they are)."""
        clock = self.clock
        assert isinstance(clock, TracingClock) and self.traced is not None
        step = clock.last_step
        if step is not None:
            step.index = record.index
            self.traced[record.index] = step
        if len(self.plot_steps) >= PLOT_STEPS:
            clock.recording = False

    def _choose_detail(self) -> None:
        """Detailed or edges-only for the step that starts now, and for how many steps (`_mode_left`)."""
        early = self.warmup + self.window.steps + DETAILED_FIRST - self.steps_seen
        if early > 0 or self.window.prof is not None or not self.by_optimizer or self.detail_every <= 1:
            detailed = True
            self._mode_left = early if early > 0 and self.by_optimizer else 1
        else:
            detailed = not self.detailed
            if detailed and not self.hooks.resumes_left():
                detailed = False  # edges only from here on: see patching.RESUME_BUDGET
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
            self.detailed = detailed
            self.clock.set_detailed(detailed)
            if detailed:
                self.hooks.resume()
            else:
                self.hooks.pause()
            if self.cuda:
                self.edges.events_on(detailed)

    def _drain_events(self) -> None:
        while self.pending and self.pending[0][1][-1][2].query():
            record, events = self.pending.popleft()
            self._device_times(record, events)

    def _device_times(self, record: StepRecord, events: list[tuple[str, Any, Any]]) -> None:
        per_phase: dict[str, float] = collections.defaultdict(float)
        for phase, start, end in events:
            per_phase[phase] += start.elapsed_time(end)
        record.device_ms = dict(per_phase)
        first = events[0][1]  # the step's device spans, placed from its first event
        placed = [(first.elapsed_time(start), first.elapsed_time(end)) for _, start, end in events]
        record.device_span_s = (max(e for _, e in placed) - min(s for s, _ in placed)) / 1e3
        if self.traced is not None and (step := self.traced.get(record.index)) is not None:
            step.device = [(phase, t0 / 1e3, t1 / 1e3) for (phase, _, _), (t0, t1) in zip(events, placed)]
        for phase, ms in per_phase.items():
            self.device_ms[phase].add(ms)

    def _comm_step(self, phases: dict[str, float]) -> None:
        """Move this step's exposed all-reduce wait out of the phase the clock charged it to (host spans)."""
        inside = "backward" if self.detailed else "other"  # on edges-only steps backward is not split out
        moved = self.ranks.step_ended(phases[inside], counted=self.steps_seen >= self.warmup)
        if moved:
            phases[inside] -= moved
            phases["comm"] += moved
            self.clock.move_summed(inside, moved)  # the clock has summed this detailed step already
