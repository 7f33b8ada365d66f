"""What each step did and which steps are kept: the step running now's counts, the bounded samples of kept steps,
and their CUDA events, read back once they have completed.

`StepCounts` counts what the step running now does (host reads, copies, the model's calls) and becomes its
`StepRecord` at the step's end; `StepSamples` keeps records in bounded uniform samples (a run of a million steps
keeps a fixed amount of memory) and gives their figures (`part`, through `figures.py`).
"""

from __future__ import annotations

import collections
import math
import random
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch

from trainspeed.load.result import StepWaits
from trainspeed.stats import median, quantile
from trainspeed.watch.edges import DEVICE_PHASES
from trainspeed.watch.figures import StepFigures, gpu_paced, phase_shares
from trainspeed.watch.phases import CALL_PHASES, EDGE_PHASES, PHASES, PhaseClock
from trainspeed.watch.result import PhaseStat, StepRecord, Steps
from trainspeed.watch.trace import Trace, TraceStep, WindowOp

T = TypeVar("T")

RESERVOIR_SIZE = 256
"""Steps (and device times) a watched run keeps. Their median locates the run's median step within
about 1.25 / sqrt(256), 8%, of the steps' spread; every kept step takes the watcher's full step
edge, and a run of n steps keeps about 256 (1 + ln(n / 256)) of them (1 371 of 20 000; a sample
of 1 024 kept 4 067). What must be exact is summed over every step instead (PhaseClock)."""

PLOT_STEPS = 400
"""Detailed steps kept in order for the per-step plots and the trace."""


class Reservoir(Generic[T]):
    """A uniform sample of at most `size` items from a stream, plus the count.

    Li's Algorithm L: once the sample is full, the index of the next item to keep is drawn in
    advance (`next_kept`), so `wants()` tells a caller whether the next item will be kept before it
    builds it, and an item that is not kept costs one comparison (`skip()`).
    """

    def __init__(self, size: int = RESERVOIR_SIZE, seed: int = 0) -> None:
        self.size = size
        self.seen = 0
        self.items: list[T] = []
        self._rng = random.Random(seed)  # our own RNG: the user's random state is never touched
        self._w = 1.0
        self.next_kept = 0
        """Index (in the stream) of the next item the sample keeps: `seen` until the sample is full."""

    def wants(self) -> bool:
        """Whether the next item offered will be kept."""
        return self.seen == self.next_kept

    def skip(self, count: int = 1) -> None:
        """Count `count` items that the sample passes over (`wants()` said no; at most
        `passes_over()` in a row)."""
        self.seen += count

    def passes_over(self) -> int:
        """How many items in a row, from the next one, the sample will not keep (0 while it fills)."""
        return self.next_kept - self.seen

    def add(self, item: T) -> None:
        if self.seen < self.size:
            self.items.append(item)
            if len(self.items) == self.size:
                self._draw_next()
            else:
                self.next_kept = self.seen + 1
        elif self.seen == self.next_kept:
            # which item to replace: random() is one C call where randrange() is three Python frames
            self.items[int(self._rng.random() * self.size)] = item
            self._draw_next()
        self.seen += 1

    def _draw_next(self) -> None:
        """After keeping item number `seen`: draw how many items to pass over before the next kept one."""
        rng = self._rng
        self._w *= math.exp(math.log(1.0 - rng.random()) / self.size)
        gap = math.floor(math.log(1.0 - rng.random()) / math.log1p(-self._w)) if self._w < 1.0 else 0
        self.next_kept = self.seen + gap + 1


@dataclass(slots=True)
class StepCounts:
    """What the step running now did, counted as it runs. The calls are counted on detailed steps only (the
    per-call hooks are in), outside the optimizer's step (an LBFGS closure)."""

    syncs: int = 0
    """Reads of device tensors' values (each a synchronisation)."""
    host_reads: int = 0
    """Reads of CPU tensors' values: no synchronisation, timed in the phase they ran in."""
    h2d_bytes: int = 0
    forwards: int = 0
    """Outermost module calls."""
    backwards: int = 0
    other_steps: int = 0
    """Steps of optimizers other than the primary one."""
    model_calls: int = 0
    chained: int = 0
    """Calls of the model given a tensor that autograd has recorded (the output of an earlier call: a recurrent
    cell stepped by hand)."""
    after_read: int = 0
    """Calls of the model after a host read since its last call (an agent acting on the action it read)."""
    anomaly_s: float = 0.0
    """Seconds spent formatting Python stacks for autograd's anomaly detection (detailed steps)."""
    recompute_s: float = 0.0
    """Seconds in module calls inside backward (activation checkpointing's recompute; detailed steps)."""
    cells: int = 0
    """Calls of the run's first recurrent cell (`watch.cells`) with gradients on."""
    passes: int = 0
    """Calls of the model with gradients on, those inside an optimizer's step (an LBFGS closure's) included."""
    reads_at_call: int = 0
    """`syncs + host_reads` at the model's last call."""
    batches: int = 0
    """Training batches asked of a DataLoader in the step."""

    def read(self, host: bool) -> None:
        """A host read: of a CPU tensor (`host`, no wait) or of a device tensor (a synchronisation)."""
        if host:
            self.host_reads += 1
        else:
            self.syncs += 1

    def copied(self, nbytes: int) -> None:
        self.h2d_bytes += nbytes

    def module_called(self, is_model: bool, args: tuple[Any, ...]) -> None:
        """An outermost module call outside an optimizer's step (`is_model`: the model's), on a detailed step."""
        self.forwards += 1
        if not is_model:
            return
        self.model_calls += 1
        self.passes += torch.is_grad_enabled()
        reads = self.syncs + self.host_reads
        if self.model_calls > 1:
            if any(isinstance(a, torch.Tensor) and a.grad_fn is not None for a in args):
                self.chained += 1
            if reads > self.reads_at_call:
                self.after_read += 1
        self.reads_at_call = reads

    def batch_taken(self) -> None:
        """A training batch was asked of a DataLoader."""
        self.batches += 1

    def backward_called(self) -> None:
        self.backwards += 1

    def anomaly(self, seconds: float) -> None:
        self.anomaly_s += seconds

    def recomputed(self, seconds: float) -> None:
        """A module call inside backward took `seconds` (detailed steps: the call hooks are in)."""
        self.recompute_s += seconds

    def cell_called(self) -> None:
        self.cells += 1

    def closure_called(self) -> None:
        """The model was called inside an optimizer's step (detailed steps)."""
        self.passes += torch.is_grad_enabled()

    def other_step(self) -> None:
        """Another optimizer than the primary one stepped inside the step running now."""
        self.other_steps += 1

    def micro_batches(self) -> float:
        """Forward-and-backward passes per optimizer step: the outermost module calls (the model's, a loss
        module's) and backward calls, the fewer of the two (backward calls alone where no module is called),
        over the optimizer steps taken in it (the primary one's and those of other optimizers, a GAN's say), and at
        most the batches a DataLoader handed the step where one did. Above 1: gradients accumulated over
        micro-batches; a second loss's backward on one forward, a forward for validation, or a GAN's losses of one
        batch (the discriminator's on real and fake samples, the generator's) are not. At least 1: an LBFGS step
        runs its passes inside the optimizer."""
        passes = min(self.forwards, self.backwards) if self.forwards else self.backwards
        if self.batches:
            passes = min(passes, self.batches)
        return max(1.0, passes / (1 + self.other_steps))

    def record(self, index: int, wall: float, phases: dict[str, float], detailed: bool, by_optimizer: bool,
               waits: StepWaits | None) -> StepRecord:
        """The step that ended as a record (its calls only where it was detailed); the next one counts from zero."""
        record = StepRecord(
            index, wall, phases, self.syncs, self.h2d_bytes, detailed=detailed,
            micro_batches=self.micro_batches() if detailed else None,
            model_calls=((self.model_calls, self.chained, self.after_read, self.cells, self.passes)
                         if detailed else None),
            anomaly_s=self.anomaly_s, recompute_s=self.recompute_s, host_reads=self.host_reads, waits=waits,
            optimizer_steps=(1 + self.other_steps if by_optimizer else 0) if detailed else None)
        self.dropped(detailed)
        return record

    def dropped(self, detailed: bool) -> None:
        """The step ended and nothing keeps it: the next one counts from zero (the calls only where it was detailed:
        on the other steps the per-call hooks count nothing)."""
        self.syncs = self.host_reads = self.h2d_bytes = self.batches = 0
        if detailed:
            self.forwards = self.backwards = self.other_steps = self.model_calls = self.chained = 0
            self.after_read = self.cells = self.reads_at_call = self.passes = 0
            self.anomaly_s = self.recompute_s = 0.0


Events = list[tuple[str, Any, Any]]
"""(phase, start, end) CUDA events of one step."""


class StepSamples:
    """The kept steps: uniform samples of the measured steps (all of them, the detailed ones alone, the warm-up's), the
    detailed steps in order for the plots (and their timelines, with a trace), and each phase's device times from the
    CUDA events of the detailed steps once those have completed (`event.query()`: no synchronisation added)."""

    def __init__(self, detail_every: int, traced: bool) -> None:
        self.measured = Reservoir[StepRecord](seed=1)
        self.detailed = Reservoir[StepRecord](seed=5) if detail_every > 1 else None
        """A uniform sample of the measured detailed steps alone: forward, backward and optimizer's median
        host times come from it (the step sample holds about one detailed step in `detail_every`).
        None when every step is detailed: the step sample is one of them."""
        self.warm = Reservoir[StepRecord](seed=2)
        self.plots: list[StepRecord] = []
        self.device_ms = {p: Reservoir[float](seed=3) for p in DEVICE_PHASES}
        self.pending: collections.deque[tuple[StepRecord, Events]] = collections.deque(maxlen=256)
        self.traced: dict[int, TraceStep] | None = {} if traced else None
        """With trace=True, the kept detailed steps' timelines by step index (watch/trace.py); else None."""
        self.first_end: float | None = None
        """When the first step ended (the clock's time): the training loop's time runs from there (`loop_seconds`)."""
        self.clocked = 0
        """The index of the last step whose end the clock read (a quiet step's is not read)."""
        self.backlog_s = 0.0
        """Seconds the device took, once the watch stopped, to finish the work the host had queued (`backlogged`)."""

    def _detail_sample(self, detailed: bool) -> Reservoir[StepRecord] | None:
        """The sample of detailed steps, where the step (or quiet run) is detailed and there is one."""
        return self.detailed if detailed else None

    def wants(self, detailed: bool) -> bool:
        """Whether the step that ends now is kept: by the step sample, by the sample of detailed steps (where it is
        detailed), or for the plots."""
        if self.measured.wants() or (detailed and len(self.plots) < PLOT_STEPS):
            return True
        sample = self._detail_sample(detailed)
        return sample is not None and sample.wants()

    def plotting(self, detailed: bool) -> bool:
        """Whether the step that starts now is kept for the per-step plots."""
        return detailed and len(self.plots) < PLOT_STEPS

    def pass_over(self, detailed: bool, steps: int = 1) -> None:
        """`steps` steps the samples pass over (`wants` said no, or a quiet run)."""
        self.measured.skip(steps)
        if (sample := self._detail_sample(detailed)) is not None:
            sample.skip(steps)

    def passes_over(self, detailed: bool) -> int:
        """How many steps in a row, from the next one, no sample keeps."""
        passes = self.measured.passes_over()
        if (sample := self._detail_sample(detailed)) is not None:
            passes = min(passes, sample.passes_over())
        return passes

    def clocked_at(self, index: int, step_started: float) -> None:
        """Step `index` ended, its end read by the clock at `step_started`."""
        self.clocked = index
        if not index:
            self.first_end = step_started  # where the loop's time starts (`loop_seconds`)

    def keep(self, record: StepRecord, events: Events, warm: bool) -> bool:
        """Keep a step's record (a warm-up step's apart) and its CUDA events; whether it went to the plots."""
        if warm:
            self.warm.add(record)
            return False
        self.measured.add(record)  # shares come from this uniform sample: no per-phase sums per step
        if record.detailed and self.detailed is not None:
            self.detailed.add(record)
        plotted = record.detailed and len(self.plots) < PLOT_STEPS
        if plotted:
            self.plots.append(record)
        if events:
            self.pending.append((record, events))
        return plotted

    @property
    def plots_full(self) -> bool:
        return len(self.plots) >= PLOT_STEPS

    def keep_trace(self, step: TraceStep | None) -> None:
        """trace=True: the timeline of the step just kept for the plots."""
        if step is not None and self.traced is not None:
            self.traced[step.index] = step

    def drain(self) -> None:
        """Read back the device times of the pending steps whose events have completed, oldest first."""
        pending = self.pending
        while pending and pending[0][1][-1][2].query():
            record, events = pending.popleft()
            self._device_times(record, events)

    def drain_all(self) -> None:
        """The run is over: waiting for the device costs it nothing. Every pending step's device times."""
        for record, events in self.pending:
            events[-1][2].synchronize()
            self._device_times(record, events)
        self.pending.clear()

    def _device_times(self, record: StepRecord, events: Events) -> None:
        per_phase: dict[str, float] = collections.defaultdict(float)
        for phase, start, end in events:
            per_phase[phase] += start.elapsed_time(end)
        first = events[0][1]  # the step's device spans, placed from its first event
        placed = [(first.elapsed_time(start), first.elapsed_time(end)) for _, start, end in events]
        record.timed_on_device(dict(per_phase), (max(e for _, e in placed) - min(s for s, _ in placed)) / 1e3)
        if self.traced is not None and (step := self.traced.get(record.index)) is not None:
            step.placed_on_device([(phase, t0 / 1e3, t1 / 1e3) for (phase, _, _), (t0, t1) in zip(events, placed)])
        for phase, ms in per_phase.items():
            self.device_ms[phase].add(ms)

    def loop_seconds(self, median_ms: float | None, seen: int, step_started: float,
                     window: tuple[float, int] = (0.0, 0)) -> float | None:
        """The training loop's wall time so far, as the script would run it unwatched: from the first step's end to
        the last one the clock read (at `step_started`), a median step for each quiet step after it (their ends are
        not read), one for the first step (its clock ran from the watch's start, the script's set-up in it), and on
        CUDA the work the device still had queued when the watch stopped (`backlogged`, at the last step's end where
        --steps stopped it); the profiler `window`'s (seconds, steps) a median step for each of its steps (the
        window's opening, closing and slower steps are the watcher's). None before two steps."""
        if self.first_end is None or seen < 2 or median_ms is None:
            return None
        unread = seen - 1 - self.clocked
        window_s, window_steps = window
        return step_started - self.first_end - window_s + (1 + unread + window_steps) * median_ms / 1e3 + \
            self.backlog_s

    def backlogged(self, seconds: float) -> None:
        """The watch stopped: the device took `seconds` to finish the work the host had queued."""
        self.backlog_s = seconds

    def _device_split(self, detailed: list[StepRecord]) -> dict[str, float]:
        """A GPU-paced step's forward, backward and optimizer as the device ran them (median spans), and its host's
        other time: the host's own split holds where its launches waited for room in the queue, not the work."""
        device_ms = self.device_ms
        split = {p: median(device_ms[p].items) or 0.0 if p in device_ms else 0.0 for p in CALL_PHASES}
        split["other"] = (median(r.phases["other"] for r in detailed) or 0.0) * 1e3
        return split

    def part(self, seen: int, quiet: int, clock: PhaseClock, window: tuple[float, int] = (0.0, 0)) -> StepFigures:
        """The steps' figures so far (partial if the run stopped early), `seen` steps and `quiet` of them in the quiet
        run under way. Data, h2d, sync and checkpoint from the clock's sums over every measured step, the split of
        the rest from its sums over every detailed one; step times exact up to RESERVOIR_SIZE measured steps, beyond
        that from the uniform sample; forward's, backward's, optimizer's and other's median host times from the
        sample of detailed steps."""
        records = self.measured.items
        n = self.measured.seen + quiet  # asked mid-run (a rank's summary): quiet steps too
        notes = []
        if not records and self.warm.items:  # a run too short to leave its warm-up: use what there is
            records = self.warm.items
            n = len(records)
            notes.append(f"only {seen} steps: warm-up steps were used for the statistics")
        whole_run = records is self.measured.items
        summed = clock.summed() if whole_run else None
        split = clock.call_split() if whole_run else None
        host_median, timed_sums = None, summed
        if (paced := gpu_paced(records)) is not None:
            host_median = median(r.wall_s * 1e3 for r in records)
            records, timed_sums = paced, None  # the clock's sums are the host's
            split = self._device_split([r for r in records if r.detailed] or records)
            notes.append(f"the GPU set the pace: the host ran ahead of it into CUDA's launch queue ({host_median:.3f} "
                         "ms a step on the host); step times are the GPU's (CUDA events at each detailed step's first "
                         "and last phase edges) where longer, and forward, backward and optimizer are split as the GPU "
                         "ran them")
        shares, detailed = phase_shares(records, timed_sums, split)
        if whole_run and self.detailed is not None and self.detailed.items:
            detailed = self.detailed.items
        step_ms = [r.wall_s * 1e3 for r in records]
        mean = timed_sums[1] * 1e3 / n if timed_sums is not None and n and timed_sums[1] > 0 else \
            (sum(step_ms) / len(step_ms) if paced and step_ms else None)
        phases = {}
        for p in PHASES:
            dev = median(self.device_ms[p].items) if p in self.device_ms and self.device_ms[p].items else None
            timed = records if p in EDGE_PHASES else detailed
            host = median(r.phases[p] for r in timed) if timed else None
            phases[p] = PhaseStat(host_ms=(host or 0.0) * 1e3, device_ms=dev, share=shares[p])
        per_phase = {p: [r.phases[p] * 1e3 for r in (records if p in EDGE_PHASES else detailed)] for p in PHASES}
        calls = [r.model_calls for r in detailed if r.model_calls is not None]
        steps = Steps(
            seen=seen, measured=n, median_ms=median(step_ms), p90_ms=quantile(step_ms, 0.9),
            mean_ms=mean, host_median_ms=host_median,
            loop_s=self.loop_seconds(median(step_ms), seen, clock.step_started, window),
            syncs_per_step=(sum(r.syncs for r in records) / len(records)) if records else 0.0,
            host_reads_per_step=(sum(r.host_reads for r in records) / len(records)) if records else 0.0,
            h2d_bytes_per_step=(sum(r.h2d_bytes for r in records) / len(records)) if records else 0.0,
            samples=sorted(self.plots, key=lambda r: r.index), times_ms=step_ms, phase_samples_ms=per_phase,
            micro_batches_per_step=median([r.micro_batches for r in detailed if r.micro_batches is not None]),
            model_calls_per_step=median([c[0] for c in calls]),
            model_calls_chained=median([c[1] for c in calls]),
            model_calls_after_read=median([c[2] for c in calls]),
            optimizer_steps_per_step=median([r.optimizer_steps for r in detailed if r.optimizer_steps is not None]),
            anomaly_ms_per_step=(sum(r.anomaly_s for r in detailed) * 1e3 / len(detailed)) if detailed else None,
            recompute_ms_per_step=(sum(r.recompute_s for r in detailed) * 1e3 / len(detailed)) if detailed else None)
        return StepFigures(steps, phases, cell_calls_per_step=median([c[3] for c in calls]),
                           passes_per_step=median([c[4] for c in calls]), summed=summed,
                           detailed=detailed, notes=notes)

    def trace(self, window_ops: list[WindowOp] | None, window_steps: int, device: str) -> Trace | None:
        """The kept steps' timelines (trace=True), with the profiler window's ops where it was torch.profiler."""
        if self.traced is None:
            return None
        notes = []
        if window_ops is None and window_steps:
            notes.append("no op track: the profiler window ran as dispatch modes on the CPU (torch.profiler runs it on "
                         "CUDA and after torch.compile), which count ops but do not place them in time")
        return Trace(sorted(self.traced.values(), key=lambda s: s.index), list(window_ops or []), device, notes)
