"""Controlled experiments: turn one knob of a training loop, measure each value with repeats
interleaved across arms, and say which differences are real.

The names below load on first use (PEP 562): importing `trainspeed.sweep.result` (the reports do) does not load
the knobs.
"""

from __future__ import annotations

from trainspeed._lazy import lazy_names

_WHERE = {"KNOBS": "trainspeed.sweep.knobs", "SweepPoint": "trainspeed.sweep.result",
          "SweepResult": "trainspeed.sweep.result", "Trial": "trainspeed.sweep.result",
          "run_sweep": "trainspeed.sweep.sweep"}

__all__ = ["KNOBS", "SweepPoint", "SweepResult", "Trial", "run_sweep"]

__getattr__, __dir__ = lazy_names(__name__, _WHERE)
