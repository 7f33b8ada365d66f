"""Controlled experiments: turn one knob of a training loop, measure each value with repeats
interleaved across arms, and say which differences are real."""

from trainspeed.sweep.knobs import KNOBS
from trainspeed.sweep.result import SweepPoint, SweepResult, Trial
from trainspeed.sweep.sweep import run_sweep

__all__ = ["KNOBS", "SweepPoint", "SweepResult", "Trial", "run_sweep"]
