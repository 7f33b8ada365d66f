"""The fast loop's decisions, as pure functions of measured times and the job's length.

Each returns a `Decision` whose reason carries the numbers behind it; numbers that were not
measured in this run are labelled predicted. The rule throughout: a strategy that costs time up
front (capture, compile) is taken only when the steps left are predicted to repay it with margin,
so `fit` is never slower than the plain loop on a short job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

CAPTURE_COST_STEPS = 200
"""Predicted cost of capturing a step, in eager steps (measured 60 ms ~ 160 seed steps here)."""
CAPTURE_MIN_GAIN = 0.25
"""Predicted minimum share of a step a replay saves (measured 0.65 on the seed's step)."""
COLD_COMPILE_S = 25.0
"""Predicted first compile of a 16-step function (measured 16-22 s on the reference 2-core CPU)."""
WARM_COMPILE_SHARE = 0.15
"""Predicted warm-cache compile as a share of the cold one (measured 0.11-0.15 on that CPU)."""
COMPILED_STEP_SHARE = 0.3
"""Predicted compiled step time as a share of the replayed one (measured 0.27 on the seed's step)."""
MARGIN = 1.5
"""Up-front costs must be repaid this many times over by the predicted savings."""


@dataclass(frozen=True)
class Decision:
    take: bool
    reason: str


def _three_figures(value: float) -> str:
    """Three significant figures without an exponent (29100, 412, 3.46, 0.0512)."""
    if value == 0:
        return "0"
    digits = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{round(value, digits):.{digits}f}"


def duration(seconds: float) -> str:
    """A time in the unit a reader takes in at a glance: µs below a millisecond, ms below a second, else s (a 29 ms
    step reads "29.1 ms", not "2.91e+04 µs")."""
    if abs(seconds) < 1e-3:
        return f"{_three_figures(seconds * 1e6)} µs"
    if abs(seconds) < 1.0:
        return f"{_three_figures(seconds * 1e3)} ms"
    return f"{_three_figures(seconds)} s"





def decide_capture(steps_left: int, eager_step_s: float) -> Decision:
    """Capture when the steps left, at the least gain expected, repay the predicted capture cost."""
    cost = CAPTURE_COST_STEPS * eager_step_s
    saving = steps_left * eager_step_s * CAPTURE_MIN_GAIN
    if saving >= MARGIN * cost:
        return Decision(True, f"{steps_left} steps left at {duration(eager_step_s)} (measured): a replay saving at least "
                              f"{CAPTURE_MIN_GAIN:.0%} would save ≥ {duration(saving)}, capture costs ~{duration(cost)} (predicted)")
    return Decision(False, f"only {steps_left} steps left at {duration(eager_step_s)} (measured): capturing (~{duration(cost)}, "
                           f"predicted) would not pay back; the plain step runs throughout")


def decide_replay(replay_step_s: float, eager_step_s: float) -> Decision:
    """Keep the replay only where it measured faster than the eager step."""
    if replay_step_s < eager_step_s:
        return Decision(True, f"replayed step {duration(replay_step_s)} vs eager {duration(eager_step_s)} (both measured): "
                              f"{eager_step_s / replay_step_s:.2f}× faster")
    return Decision(False, f"replayed step {duration(replay_step_s)} is not faster than eager {duration(eager_step_s)} "
                           "(both measured): back to the plain step")


@dataclass(frozen=True)
class CompilePrediction:
    compile_s: float
    step_s: float
    source: str
    """Where the two numbers come from, in words."""


def predict_compile(replay_step_s: float, earlier: dict[str, float] | None) -> CompilePrediction:
    """Compile time and compiled step time: from an earlier compile of this step on this machine if any."""
    if earlier is None:
        return CompilePrediction(COLD_COMPILE_S, replay_step_s * COMPILED_STEP_SHARE,
                                 "predicted: no earlier compile of this step on this machine")
    if "warm_s" in earlier:
        return CompilePrediction(earlier["warm_s"], earlier["step_s"],
                                 "measured in an earlier run on this machine, compile cache warm")
    return CompilePrediction(earlier["cold_s"] * WARM_COMPILE_SHARE, earlier["step_s"],
                             f"compiled step measured earlier here; compile predicted at {WARM_COMPILE_SHARE:.0%} "
                             f"of the first compile's {earlier['cold_s']:.1f} s (its cache is kept)")


def decide_compile(steps_left: int, replay_step_s: float, prediction: CompilePrediction) -> Decision:
    """Compile when the predicted saving over the steps left repays the predicted compile time."""
    saving = steps_left * (replay_step_s - prediction.step_s)
    if saving >= MARGIN * prediction.compile_s:
        return Decision(True, f"{steps_left} steps left: compiled steps ({duration(prediction.step_s)}) would save "
                              f"{saving:.1f} s over the replay ({duration(replay_step_s)}), compile takes "
                              f"{prediction.compile_s:.1f} s ({prediction.source})")
    return Decision(False, f"{steps_left} steps left would save {max(saving, 0.0):.1f} s compiled "
                           f"({duration(prediction.step_s)}/step vs {duration(replay_step_s)}); compile takes "
                           f"{prediction.compile_s:.1f} s ({prediction.source}): not repaid")


def pick_threads(step_s_by_threads: dict[int, float]) -> Decision:
    """The thread count whose steps measured fastest."""
    best = min(step_s_by_threads, key=step_s_by_threads.__getitem__)
    shown = ", ".join(f"{n}: {duration(t)}" for n, t in sorted(step_s_by_threads.items()))
    return Decision(True, f"{best} intra-op thread{'s' if best > 1 else ''} (measured per step: {shown})")
