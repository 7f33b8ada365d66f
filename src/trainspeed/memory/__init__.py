"""Training memory: an exact estimate on fake tensors, a measured peak, the largest batch that fits."""

from trainspeed.memory.estimate import EstimateError, estimate_memory
from trainspeed.memory.measure import measure_memory
from trainspeed.memory.result import BatchSearch, LayerMemory, MeasuredPeak, MemoryEstimate

__all__ = ["BatchSearch", "EstimateError", "LayerMemory", "MeasuredPeak", "MemoryEstimate",
           "estimate_memory", "measure_memory"]
