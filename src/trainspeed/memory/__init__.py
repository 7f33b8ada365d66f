"""Training memory: an exact estimate on fake tensors, a measured peak, the largest batch that fits.

The names below load on first use (PEP 562): importing `trainspeed.memory.result` (the doctor's report does, for
its categories) does not load the estimator.
"""

from __future__ import annotations

from trainspeed._lazy import lazy_names

_WHERE = {"EstimateError": "trainspeed.memory.estimate", "estimate_memory": "trainspeed.memory.estimate",
          "measure_memory": "trainspeed.memory.measure", "BatchSearch": "trainspeed.memory.result",
          "LayerMemory": "trainspeed.memory.result", "MeasuredPeak": "trainspeed.memory.result",
          "MemoryEstimate": "trainspeed.memory.result"}

__all__ = ["BatchSearch", "EstimateError", "LayerMemory", "MeasuredPeak", "MemoryEstimate",
           "estimate_memory", "measure_memory"]

__getattr__, __dir__ = lazy_names(__name__, _WHERE)
