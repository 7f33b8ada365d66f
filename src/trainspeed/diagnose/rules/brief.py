"""The words of a verdict's short view: times and shares as a user reads them, in one line (`Verdict.brief`)."""

from __future__ import annotations

import math


def ms(value: float) -> str:
    """"0.26 ms", "38.2 ms", "412 ms", "1.94 s": a time in milliseconds to about three figures."""
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    if value >= 100:
        return f"{value:.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    if value >= 0.1:
        return f"{value:.2f} ms"
    return f"{value:.3f} ms"


def pct(share: float) -> str:
    """"85%", or "<1%" for a share that is not nothing but rounds to it."""
    return "<1%" if 0 < share < 0.005 else f"{share:.0%}"


def of_step(part: float, step: float) -> str:
    """"38.2 ms of each 45.1 ms step (85%)": a part of the median step."""
    share = f" ({pct(part / step)})" if step > 0 else ""
    return f"{ms(part)} of each {ms(step)} step{share}"


def part_of_step(part: float, step: float) -> str:
    """"90% of the step (36.0 ms)": a part of the median step, shorter than `of_step`."""
    return f"{pct(part / step) if step > 0 else '?'} of the step ({ms(part)})"


def every(steps: float) -> str:
    """"every step", "one every 20 steps": an interval in steps."""
    return "every step" if round(steps) <= 1 else f"one every {steps:.0f} steps"


def plural(count: float, word: str) -> str:
    """"1 save", "69 saves"."""
    return f"{count:.0f} {word}{'' if round(count) == 1 else 's'}"


def round_interval(steps: float) -> int:
    """An interval a user would write: `steps` rounded up to 1, 2 or 5 times a power of ten (12 -> 20, 130 -> 200)."""
    if steps <= 1:
        return 1
    power = 10 ** math.floor(math.log10(steps))
    return next(k * power for k in (1, 2, 5, 10) if k * power >= steps)


LARGEST_BATCH = ("`trainspeed memory FILE.py:FACTORY` (FACTORY: a function of yours that returns the model) gives the "
                 "largest batch that fits")
"""The command a verdict names for the largest batch: the estimate needs the model, which the script builds."""
LARGEST_BATCH_FIX = "the largest batch that fits: `trainspeed memory FILE.py:FACTORY`"
