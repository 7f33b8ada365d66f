"""`trainspeed doctor --try`'s results, judged: each lever's measured speed-up of the training run with its 95%
interval beside the verdict's prediction, and whether the script computed the same losses with it. Pure functions
of the runs' times and losses (`trainspeed.tryout` runs them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from trainspeed.diagnose.verdict import Lever

TIMED = ("the training run's wall time: from the end of its first step to the script's end (after --steps steps, or "
         "its last), evaluations and saves included")
"""What `doctor --try` times in each run."""
LEVEL = 0.95


@dataclass(frozen=True)
class LossCheck:
    """The losses of a lever's run against a plain run's."""

    compared: int
    """Losses compared: the first `compared` of each run (both count their backward calls of one-element tensors)."""
    same: bool
    """Bit for bit the same, and as many."""
    max_relative: float | None
    """The largest relative difference between them (0.0 where the same; None: no loss to compare)."""
    plain_repeat: bool | None
    """Whether two plain runs gave the same losses bit for bit (None: only one plain run finished): where they do
    not, the script draws unseeded random numbers, and a lever's difference says nothing."""
    counts: tuple[int, int] = (0, 0)
    """Losses seen in the plain run and in the lever's."""

    @property
    def text(self) -> str:
        if not self.compared:
            return "no loss seen (no backward from a one-element tensor)"
        if self.plain_repeat is False:
            return "not comparable: two plain runs gave different losses (the script is not seeded)"
        counts = "" if self.counts[0] == self.counts[1] else f" ({self.counts[1]} losses against {self.counts[0]})"
        if self.same:
            return f"the same {self.compared} losses, bit for bit"
        return f"largest relative difference {self.max_relative:.2g} over {self.compared} losses{counts}"


@dataclass(frozen=True)
class TriedLever:
    """One verdict's lever, applied in runs of its own and timed against plain runs, alternated."""

    verdict: str
    lever: Lever
    predicted: float | None
    """The verdict's predicted speed-up of the training loop (not measured)."""
    measured: float | None
    """Plain run's time over the lever's: the geometric mean over the rounds (None: no round finished)."""
    interval: tuple[float, float] | None
    """Its 95% interval (Student's t on the rounds' log ratios; None with fewer than two rounds)."""
    plain_s: list[float]
    lever_s: list[float]
    """The training run's seconds in each round (TIMED), plain and with the lever."""
    losses: LossCheck | None = None
    failed: str | None = None
    """"failed: ..." with the script's own last error line, where a run with the lever failed."""
    after: str | None = None
    """The first verdict of the lever's first run (what the doctor then names)."""
    folder: str | None = None
    """Where its runs' reports are kept (`--out`): doctor-<round>.json beside the plain runs' in ../plain."""

    @property
    def within(self) -> bool | None:
        """Whether the prediction fell within ±25% of the measured speed-up (None: either is missing)."""
        if self.predicted is None or self.measured is None:
            return None
        return abs(self.predicted / self.measured - 1) <= 0.25


@dataclass(frozen=True)
class NotTried:
    """A verdict ranked before the last one tried whose action needs an edit of the script."""

    verdict: str
    action: str
    site: str | None = None
    """The script's line to edit (`file:line`), where the verdict names one."""


@dataclass(frozen=True)
class Tried:
    """What `doctor --try` measured."""

    rows: list[TriedLever]
    edits: list[NotTried]
    rounds: int
    """Rounds asked for (each: one plain run and one run per lever)."""
    steps: int | None
    """Each run's --steps (None: the script ran to its end)."""
    seconds: float
    """How long the tries took, all runs together."""
    interrupted: bool = False
    """Ctrl-C stopped them: the rows hold the rounds finished until then."""
    notes: list[str] = field(default_factory=list)
    timed: str = TIMED


def speedup(plain: Sequence[float], lever: Sequence[float], level: float = LEVEL) -> tuple[float | None,
                                                                                          tuple[float, float] | None]:
    """The lever's speed-up from paired rounds (plain[i] beside lever[i]): the geometric mean of plain / lever and,
    with two rounds or more, its interval (Student's t on the log ratios: a few rounds are all there is)."""
    pairs = [(a, b) for a, b in zip(plain, lever) if a > 0 and b > 0]
    if not pairs:
        return None, None
    logs = [math.log(a / b) for a, b in pairs]
    mean = sum(logs) / len(logs)
    if len(logs) < 2:
        return math.exp(mean), None
    from scipy.stats import t

    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    half = float(t.ppf(0.5 + level / 2, len(logs) - 1)) * sd / math.sqrt(len(logs))
    return math.exp(mean), (math.exp(mean - half), math.exp(mean + half))


def _relative(a: float, b: float) -> float:
    if a == b:
        return 0.0
    if math.isnan(a) or math.isnan(b):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b))


def _same(a: Sequence[float], b: Sequence[float]) -> bool:
    return len(a) == len(b) and all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b))


def check_losses(plain: Sequence[Sequence[float]], lever: Sequence[float]) -> LossCheck:
    """The lever's losses against the first plain run's; `plain` holds every finished plain run's (two or more: the
    script's own repeatability is checked too)."""
    first = plain[0] if plain else []
    n = min(len(first), len(lever))
    repeat = _same(plain[0], plain[1]) if len(plain) >= 2 else None
    if not n:
        return LossCheck(0, False, None, repeat, (len(first), len(lever)))
    worst = max(_relative(a, b) for a, b in zip(first[:n], lever[:n]))
    return LossCheck(n, _same(first, lever), worst, repeat, (len(first), len(lever)))
