"""Saw-tooth utilisation: the GPU alternating idle and busy, as it does when it waits for data."""

from __future__ import annotations

IDLE, BUSY = 10.0, 50.0
"""Utilisation (%) below IDLE counts as idle, above BUSY as busy (nvidia-smi's 0%-99%-0% swings)."""


def detect_sawtooth(util: list[float], times: list[float], step_period_s: float) -> tuple[bool, str]:
    """Is utilisation swinging between idle and busy, with the rhythm of the steps?

    Saw-tooth when both idle and busy samples are common (each >= 15%) and the idle<->busy
    switches come at least once every 4 steps - slower swings are phases of the run, not its steps.
    """
    if len(util) < 20 or len(times) != len(util):
        return False, f"too few utilisation samples ({len(util)})"
    idle = sum(u < IDLE for u in util) / len(util)
    busy = sum(u > BUSY for u in util) / len(util)
    states = [u < IDLE for u in util if u < IDLE or u > BUSY]
    switches = sum(a != b for a, b in zip(states, states[1:]))
    span = times[-1] - times[0]
    if span <= 0:
        return False, "no time span"
    cycles_per_s = switches / 2 / span
    steps_per_s = 1 / step_period_s if step_period_s > 0 else 0.0
    rhythmic = steps_per_s > 0 and cycles_per_s >= steps_per_s / 4
    saw = idle >= 0.15 and busy >= 0.15 and rhythmic and switches >= 4
    why = (f"idle {idle:.0%} / busy {busy:.0%} of {len(util)} samples, "
           f"{cycles_per_s:.1f} idle-busy cycles/s vs {steps_per_s:.1f} steps/s")
    return saw, why
