"""The knobs `trainspeed sweep` turns, by name."""

from trainspeed.sweep.knobs.base import Knob, SweepContext
from trainspeed.sweep.knobs.batch_size import BatchSize
from trainspeed.sweep.knobs.device import Crossover, Device
from trainspeed.sweep.knobs.memory_trade import Accumulate, ActivationCheckpointing
from trainspeed.sweep.knobs.record_every import RecordEvery
from trainspeed.sweep.knobs.saving import CheckpointSave
from trainspeed.sweep.knobs.simple import Amp, Compile, CudaGraphs, Threads
from trainspeed.sweep.knobs.workers import NumWorkers
from trainspeed.sweep.knobs.world_size import WorldSize

KNOBS: dict[str, type[Knob]] = {k.name: k for k in (
    RecordEvery, BatchSize, NumWorkers, Threads, Device, Crossover, Amp, Compile, CudaGraphs, Accumulate,
    ActivationCheckpointing, CheckpointSave, WorldSize)}

__all__ = ["KNOBS", "Knob", "SweepContext"]
