"""Result objects of a sweep: one point per knob value, the knob's own findings, the advice."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainspeed._render import Renders


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

    @property
    def seconds(self) -> float:
        """The median seconds per trial of a point that ran (a failed point has none: ValueError)."""
        if self.median_s is None:
            raise ValueError(f"{self.value}: no measurement ({self.error or 'failed'})")
        return self.median_s

    @property
    def interval(self) -> tuple[float, float]:
        """The 95% interval of a point that ran; its median at both ends where it has none (a predicted point)."""
        m = self.seconds
        return (self.ci_low if self.ci_low is not None else m, self.ci_high if self.ci_high is not None else m)


@dataclass
class SweepResult(Renders):
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

    def recommend(self, advice: str) -> None:
        """The knob's advice, from what the sweep measured (`Knob.analyse`)."""
        self.recommendation = advice
