"""A watched run's measurements: the `Watcher`'s parts joined into one `WatchResult` (each part's `part()`), read,
never written."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Protocol

from trainspeed.watch.frameworks import unsupported_note
from trainspeed.watch.result import WatchResult

if TYPE_CHECKING:
    from trainspeed.load.tracker import LoadTracker
    from trainspeed.watch.boundary import StepBoundary
    from trainspeed.watch.checkpoints import CheckpointTracker
    from trainspeed.watch.evaluation import EvaluationTracker
    from trainspeed.watch.loaders import LoaderTracker
    from trainspeed.watch.machine_load import MachineTracker
    from trainspeed.watch.made_at import FrameworkTracker
    from trainspeed.watch.model import ModelTracker
    from trainspeed.watch.optimizers import OptimizerTracker
    from trainspeed.watch.phases import PhaseClock
    from trainspeed.watch.profile_window import ProfileWindow
    from trainspeed.watch.ranks import RankTracker
    from trainspeed.watch.reads import HostReads
    from trainspeed.watch.sampler import Sampler
    from trainspeed.watch.samples import StepSamples
    from trainspeed.watch.schedule import StepSchedule
    from trainspeed.watch.window import WindowTracker


class Parts(Protocol):
    """The parts of a watcher (`session.Watcher`) that the measurements join."""

    schedule: StepSchedule
    samples: StepSamples
    window: ProfileWindow
    clock: PhaseClock
    model: ModelTracker
    boundary: StepBoundary
    ranks: RankTracker
    frameworks: FrameworkTracker
    sampler: Sampler
    reads: HostReads
    optimizers: OptimizerTracker
    checkpoints: CheckpointTracker
    loaders: LoaderTracker
    machine: MachineTracker
    evaluation: EvaluationTracker
    load: LoadTracker
    run_window: WindowTracker


def joined(w: Parts, gathering: bool = False) -> WatchResult:
    """The measurements so far (partial if the run stopped early); `gathering`: without the other ranks' (the
    summary each rank sends under torchrun)."""
    schedule, samples, window = w.schedule, w.samples, w.window
    fig = samples.part(0 if w.run_window.before else schedule.seen, schedule.quiet_so_far(), w.clock, window.span)
    model = w.model.part()
    if w.model.cell is not None and (fig.cell_calls_per_step or 0) >= 2:
        model = dataclasses.replace(model, cell_loop=dataclasses.replace(
            w.model.cell, calls_per_step=fig.cell_calls_per_step or 0.0, passes_per_step=fig.passes_per_step or 1.0,
            layers=w.model.stacked()))
    notes = w.boundary.notes + schedule.notes + w.ranks.notes + window.notes
    framework = w.frameworks.part()
    too_old = unsupported_note(framework) if framework is not None else None
    if too_old is not None:
        notes.append(too_old)
    notes += fig.notes
    summed = fig.summed
    result = WatchResult(
        steps=fig.steps, phases=fig.phases, model=model,
        process=w.sampler.process(model.device, w.model.device_index),
        gpu_util=w.sampler.gpu.part(model.device, fig.steps.times_ms),
        window=window.part(), reads=w.reads.part(), sites=w.sampler.part(),
        optimizers=w.optimizers.part(w.boundary.changes), checkpoints=w.checkpoints.part(),
        loaders=w.loaders.part(summed[1] if summed is not None and summed[1] > 0 else None),
        machine=w.machine.part(), evaluation=w.evaluation.part(summed, fig.steps.measured),
        load=w.load.part([(r.phases, r.waits) for r in fig.detailed if r.waits is not None],
                         {name: stat.share for name, stat in fig.phases.items()},
                         fig.steps.mean_ms or fig.steps.median_ms),
        framework=framework, notes=notes, trace=samples.trace(window.trace_ops, window.steps, model.device),
        run_window=w.run_window.part(schedule.seen))
    if gathering:
        return result
    return dataclasses.replace(result, distributed=w.ranks.part(result))
