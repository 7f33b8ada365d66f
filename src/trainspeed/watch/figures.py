"""The steps' figures from the kept records: each phase's share of the run, where the GPU set the pace, and the
figures `StepSamples.part` joins (`StepFigures`). Plain functions of the records they are given.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from trainspeed.watch.phases import CALL_PHASES, EDGE_PHASES, PHASES
from trainspeed.watch.result import PhaseStat, StepRecord, Steps


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


PACED = 1.1
"""The GPU sets the pace where its steps add up to this many times the host's (`gpu_paced`)."""


def gpu_paced(records: list[StepRecord]) -> list[StepRecord] | None:
    """Where the host ran ahead of the GPU, the records with the GPU's step times; else None.

    CUDA runs behind the host: a launch returns at once until the device's queue is full (about a thousand kernels).
    After a synchronisation (the profiler window's end, a checkpoint, the run's start) a GPU-bound loop's host steps are
    its launches alone, for as many steps as the queue holds: a short run's host median is then a fraction of its real
    step (BENCHMARKS.md, "Where the code's constants come from"). Where the detailed steps' device spans
    (`StepRecord.device_span_s`) add up to PACED times their host walls or more, each record's wall becomes the longer
    of the two. (Sums, not a median of ratios: in such a run about half the steps run ahead and half wait for room in
    the queue.)"""
    spanned = [r for r in records if r.device_span_s is not None]
    if not spanned or sum(r.device_span_s or 0.0 for r in spanned) < PACED * sum(r.wall_s for r in spanned):
        return None
    return [replace(r, wall_s=r.device_span_s) if r.device_span_s is not None and r.device_span_s > r.wall_s else r
            for r in records]


@dataclass(frozen=True)
class StepFigures:
    """The steps tracker's figures: its part of the result, the phase table, and what the session joins in."""

    steps: Steps
    phases: dict[str, PhaseStat]
    cell_calls_per_step: float | None
    """Calls of a recurrent cell per step, the median over the detailed steps (the model tracker's `cell_loop`)."""
    passes_per_step: float | None
    """Calls of the model with gradients on per step, an optimizer closure's included (the median over the detailed
    steps)."""
    summed: tuple[dict[str, float], float] | None = field(repr=False)
    """The clock's sums over every measured step (None where the statistics came from the warm-up)."""
    detailed: list[StepRecord] = field(default_factory=list, repr=False)
    """The detailed steps the phases' medians came from (the load's waits by phase come from them too)."""
    notes: list[str] = field(default_factory=list)
