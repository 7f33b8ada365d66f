"""A verdict: what the rules conclude from a run's measurements."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    """A diagnosis: what is wrong (id), the numbers that show it, what to do, what it should buy."""

    id: str
    evidence: str
    action: str
    predicted_speedup: float | None
    """Predicted (not measured) step speed-up if the action is taken; None when no model predicts it."""
