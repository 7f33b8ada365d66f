"""What `trainspeed.fit` hands back."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Strategy:
    """What the loop chose, and why."""

    name: str
    """Short name: the step runners used, e.g. "cpu:replay", "cpu:eager+compiled", "cuda:graph"."""
    device: str
    threads: int | None
    """CPU intra-op threads used (None on CUDA)."""
    explain: list[str] = field(default_factory=list)
    """One line per decision, with the measured or predicted numbers behind it."""


@dataclass(frozen=True)
class FitTimings:
    """Wall seconds (the device synchronised at the end), by where they went."""

    total_s: float
    setup_s: float
    """Validation, device moves, threads probe bookkeeping."""
    capture_s: float
    compile_s: float
    steps: int
    steps_by_runner: dict[str, int]
    """How many optimizer steps each runner (eager, replay, compiled, graph) took."""
    step_s_by_runner: dict[str, float]
    """Median seconds per step of each runner over its timed probe steps."""
    seconds_by_runner: dict[str, float]
    """Host wall seconds spent in each runner's steps (compile and capture apart); on CUDA the
    device may still be working when a step returns, so these add up to the total only after the
    final synchronisation."""


@dataclass(frozen=True)
class FitResult:
    losses: list[float]
    """One loss per recorded step, in order (the step's loss before its update)."""
    recorded_steps: list[int]
    """1-based optimizer step number of each recorded loss."""
    epochs: int
    steps_per_epoch: int
    strategy: Strategy
    timings: FitTimings
