"""Result objects of a sweep: one point per knob value, the knob's own findings, the advice."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Trial:
    """One timed trial: `steps` training steps of one arm (or the reason it failed)."""

    value: str
    repeat: int
    seconds: float | None
    error: str = ""
    extras: dict[str, Any] = field(default_factory=dict)
    """Per-trial measurements beside the time (records made, host time in reads, ...)."""

    @property
    def ok(self) -> bool:
        return self.seconds is not None and not self.error


@dataclass
class SweepPoint:
    """One knob value: the median of its trials and the 95% bootstrap interval of that median."""

    value: str
    median_s: float | None
    ci_low: float | None
    ci_high: float | None
    ok: bool
    error: str = ""
    trials: int = 0
    predicted: bool = False
    """True when the point is a prediction of the step-time model, not a measurement."""
    extras: dict[str, Any] = field(default_factory=dict)
    """Knob-specific numbers: samples_per_s, step_ms, peak_bytes, compile_s, ..."""


@dataclass
class SweepResult:
    knob: str
    workload: str
    device: str
    steps: int
    repeats: int
    points: list[SweepPoint]
    findings: dict[str, Any] = field(default_factory=dict)
    """Knob-level results: the record-every line fit, the knee, the crossover grid, ..."""
    recommendation: str = ""
    notes: list[str] = field(default_factory=list)
    same_as_best: list[str] = field(default_factory=list)
    """Values whose interval overlaps the best point's: no measurable difference from it."""
    best: str | None = None
