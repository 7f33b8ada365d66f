"""What the probes measure, as the rules read it, and what a probe a rule declares is given (`ProbeRun`): types with
no torch (the rules import no torch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainspeed.watch.result import WatchResult


@dataclass(frozen=True)
class Handover:
    """One worker handing batches of the run's shapes over, per batch, measured."""

    wall_ms: float
    """Milliseconds per batch delivered by one worker whose items cost nothing to make: the handover's own
    rate (stacking the items, sharing the tensors, sending and rebuilding them)."""
    main_ms: float
    """Of that, the training process's own CPU time per batch (receiving and rebuilding it): a cost that more
    workers cannot take off the step."""


@dataclass(frozen=True)
class ProbeRun:
    """What a probe after the run is given: the run as measured, the run the script's verdicts are judged on (less its
    waits for a core, where other processes held the cores), what the watcher saw of the script (its model, the
    primary optimizer's shapes, the loaders' items: `watch.subject.RunSubject`, or None), and whether other processes
    held the cores."""

    result: WatchResult
    judged: WatchResult
    subject: Any
    busy: bool


PROBE_STEPS = 64
"""The cell-loop probe's (`probe.rnn`) stepped loop over a longer sequence is timed over this many of its time steps
and scaled to its length: each time step runs the same calls (1.045 and 1.057 ms a step over 64 and 200 steps in
float32, 1.067 and 1.101 in float64: two stacked nn.LSTMCell(1, 51) on a batch of 45), and an LBFGS script's two
float64 cells over its 200 time steps took about 0.5 s of the doctor's time after the run. The fused layer is timed
over the whole sequence: oneDNN's time per step moves with the length (0.15 to 0.25 ms in float32 over 64, 128, 200
and 400 steps). Here, where the rules read it too (they import no torch)."""
