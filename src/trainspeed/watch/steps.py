"""The end of each watched step: which steps are kept, detailed, sampled or run quiet, and the
CUDA events read back once they have completed.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

import torch

from trainspeed.probe.page_faults import minor_faults
from trainspeed.watch.result import StepRecord
from trainspeed.watch.stats import Reservoir
from trainspeed.watch.trace import TracingClock

if TYPE_CHECKING:
    from trainspeed.watch.session import Watcher


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


def _micro_batches(calls: list[int]) -> float:
    """Forward-and-backward passes per optimizer step: a step's outermost module calls (the model's, a
    loss module's) and backward calls, the fewer of the two (backward calls alone where no module is
    called), over the optimizer steps taken in it (the primary one's and those of other optimizers, a
    GAN's say). Above 1: gradients accumulated over micro-batches; a second loss's backward on one
    forward, or a forward for validation, are not."""
    forwards, backwards, other_steps = calls[:3]
    passes = min(forwards, backwards) if forwards else backwards  # a model of bare tensors has no module call
    return max(passes, 1) / (1 + other_steps)  # an LBFGS step runs its passes inside the optimizer


def step_ended(self: Watcher, optimizer: torch.optim.Optimizer | None = None, *hook_args: Any) -> None:
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
    if self._eval_from is not None:
        self.training_again(False)
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
        self.step_syncs = self.step_host_reads = self.step_h2d = 0
        if self.detailed:  # the per-call hooks count nothing on the other steps: nothing to zero
            self.step_calls = [0, 0, 0, 0, 0, 0]
            self.step_timed = [0.0, 0.0]
    else:
        wall, phases = self.clock.end_step()
        if comm_busy:
            self._comm_step(phases)
        syncs, self.step_syncs = self.step_syncs, 0
        host_reads, self.step_host_reads = self.step_host_reads, 0
        h2d, self.step_h2d = self.step_h2d, 0
        calls, self.step_calls = self.step_calls, [0, 0, 0, 0, 0, 0]
        (anomaly, recompute), self.step_timed = self.step_timed, [0.0, 0.0]
        self._keep_step(StepRecord(index, wall, phases, syncs, h2d, detailed=self.detailed,
                                   micro_batches=_micro_batches(calls) if self.detailed else None,
                                   model_calls=(calls[3], calls[4], calls[5]) if self.detailed else None,
                                   anomaly_s=anomaly, recompute_s=recompute, host_reads=host_reads,
                                   optimizer_steps=(1 + calls[2] if self.primary_optimizer is not None else 0)
                                   if self.detailed else None))
    if self.pending:
        self._drain_events()
    self._mode_left -= 1
    if self._mode_left <= 0:
        self._choose_detail()
    if index < self.settled_at:
        early_faults(self, index)
    if index + 1 == self.settled_at:  # the steps from the next one are measured
        self._start_sums()
    if index >= self.settled_at and comm.backend is None and not self._plotting() and \
            not (self.detailed and self.device == "cuda"):
        self._go_quiet(index)
    self.clock.skip()  # this edge's own work (tens of us when it keeps a step) is not the next step's
    if self.max_steps is not None and self.steps_seen >= self.max_steps:
        raise StopWatching(f"stopped after {self.steps_seen} steps")


def backward_running(self: Watcher) -> bool:
    """Whether backward is the innermost phase open: a module called now is called by autograd (activation
    checkpointing recomputing a segment's forward), not by the script."""
    return self.clock.stack[-1:] == ["backward"]


def recomputed(self: Watcher, seconds: float) -> None:
    """A module call inside backward took `seconds` (detailed steps: the call hooks are in)."""
    self.step_timed[1] += seconds


def _detail_sample(self: Watcher) -> Reservoir[StepRecord] | None:
    """The sample of detailed steps, if the step running now (or the quiet run) is detailed and
    there is one: the sample that step is offered to besides the step sample."""
    return self.detailed_steps if self.detailed else None


def _detail_wanted(self: Watcher) -> bool:
    """Whether the step that ends now is detailed and the sample of detailed steps keeps it."""
    sample = self._detail_sample()
    return sample is not None and sample.wants()


def _plotting(self: Watcher) -> bool:
    """Whether the step that starts now is kept for the per-step plots."""
    return self.detailed and len(self.plot_steps) < PLOT_STEPS


def _go_quiet(self: Watcher, index: int) -> None:
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


def _catch_up(self: Watcher, upto: int) -> float:
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


def _quiet_so_far(self: Watcher) -> int:
    """Steps of the current quiet run ended so far (not yet counted into the sample)."""
    return self.steps_seen - self._quiet_from if self.quiet_until else 0


def _keep_step(self: Watcher, record: StepRecord) -> None:
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
        if self.traced is not None:
            _keep_trace(self, record)
    if events:
        self.pending.append((record, events))


def _keep_trace(self: Watcher, record: StepRecord) -> None:
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


def _choose_detail(self: Watcher) -> None:
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


def _drain_events(self: Watcher) -> None:
    while self.pending and self.pending[0][1][-1][2].query():
        record, events = self.pending.popleft()
        self._device_times(record, events)


def _device_times(self: Watcher, record: StepRecord, events: list[tuple[str, Any, Any]]) -> None:
    per_phase: dict[str, float] = collections.defaultdict(float)
    for phase, start, end in events:
        per_phase[phase] += start.elapsed_time(end)
    record.device_ms = dict(per_phase)
    if self.traced is not None and (step := self.traced.get(record.index)) is not None:
        first = events[0][1]  # the step's device spans, placed from its first event
        step.device = [(phase, first.elapsed_time(start) / 1e3, first.elapsed_time(end) / 1e3)
                       for phase, start, end in events]
    for phase, ms in per_phase.items():
        self.device_ms[phase].add(ms)


def early_faults(self: Watcher, index: int) -> None:
    """The process's minor page faults as the first step ends and as the last step before the profiler window ends:
    the warm-up's steady steps, before the window's memory and the detailed runs' can move where glibc's heap ends
    (a script whose allocator hands big blocks back every step faulted 36 000 pages a step unwatched and 1 400 to
    14 000 under the doctor, 2026-11-26)."""
    if index == 0 or index + 1 == self.window.opens_at(self.warmup):
        self.early_faults.append((index + 1, minor_faults()))
