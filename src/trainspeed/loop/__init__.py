"""The fast training loop: device-resident data, sync-free loss records, captured and compiled steps."""

from trainspeed.loop.fit import FastLoop, fit
from trainspeed.loop.result import FitResult, FitTimings, Strategy

__all__ = ["FastLoop", "FitResult", "FitTimings", "Strategy", "fit"]
