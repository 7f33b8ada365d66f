"""Result objects of the memory estimator and of a measured step."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainspeed._render import Renders

CATEGORIES = ("params", "grads", "optimizer", "input", "activations", "transient", "workspace", "unsharded",
              "communication")
"""What the peak holds. Sharded steps (`memory/sharded.py`): params, grads and optimizer are the rank's shards;
`unsharded` the all-gathered parameters FSDP holds at the peak; `communication` DDP's gradient buckets (FSDP's
collective buffers are in `transient`)."""


@dataclass(frozen=True)
class LayerMemory:
    """One call of a leaf module in the replayed step (a layer used twice has two rows)."""

    name: str
    kind: str
    output_shape: list[int] | None
    params: int
    """Parameters the layer owns (counted on its first call only)."""
    saved_bytes: int
    """Bytes autograd saved for backward during this call (parameters excluded; a storage
    saved by several layers is counted at the first)."""


@dataclass(frozen=True)
class MemoryEstimate(Renders):
    """Predicted peak of live bytes in a steady-state training step (second step on)."""

    total_bytes: int
    """Predicted peak of bytes live at any moment of the step (parameters, optimizer state,
    input, gradients, activations, temporaries)."""
    fixed_bytes: int
    """The part that does not grow with the batch: total = fixed + batch x per_sample."""
    per_sample_bytes: float
    batch_size: int
    breakdown: dict[str, int]
    """What was live at the peak, by category (CATEGORIES); sums to total_bytes."""
    layers: list[LayerMemory]
    peak_phase: str
    """The phase in which the peak falls: forward, backward or optimizer."""
    device: str
    optimizer: str
    amp: str | None
    checkpointing: bool
    param_count: int
    notes: list[str] = field(default_factory=list)
    world_size: int = 1
    """Ranks of the data-parallel world this is one rank's peak of (1: a single device)."""
    shard: str | None = None
    """How the world shards the step (`memory.sharded.SHARD_MODES`); None: a single device."""
    fsdp_param_dtype: str | None = None
    """FSDP2's MixedPrecisionPolicy's parameter dtype ("bf16", "fp16"); None: none."""
    cpu_offload: bool = False
    """FSDP2's CPUOffloadPolicy: the totals are the device's; the shards, their gradients and the optimizer live on
    the host (`host_bytes`)."""
    host_bytes: int | None = None
    """Under CPU offload: the host memory's peak for the rank's shards, gradients and optimizer (None: no offload)."""

    def predict(self, batch_size: int) -> int:
        """The linear model's prediction at another batch size."""
        return int(self.fixed_bytes + batch_size * self.per_sample_bytes)


@dataclass(frozen=True)
class MeasuredPeak:
    """The peak of a real training step on a real device."""

    peak_bytes: int
    """Peak bytes live during the step, parameters and optimizer state included."""
    device: str
    method: str
    """How: "torch.cuda.max_memory_allocated" or "torch.profiler allocator events"."""


@dataclass(frozen=True)
class BatchSearch:
    """The largest batch that fits a budget."""

    budget_bytes: int
    margin: float
    max_batch: int | None
    """None when not even a batch of 1 fits."""
    predicted_bytes: int | None
    trials: list[tuple[int, bool, int | None]] = field(default_factory=list)
    """Measured confirmations: (batch, fitted, measured peak bytes or None on OOM)."""
    confirmed: bool = False


@dataclass(frozen=True)
class RanksRow:
    """The fewest ranks of a given memory that fit a batch per rank, for one shard mode (`memory/ranks.py`)."""

    shard: str
    ranks: int | None
    """The fewest ranks whose busiest rank's peak fits (None: no number of ranks, up to MOST_RANKS)."""
    peak_bytes: int | None
    """The busiest rank's predicted peak at that world size (None where none fits)."""
    confirmed: bool
    """Whether replays settled it: the peak at `ranks` and over it at one rank fewer, or (`ranks` None) the part
    that does not shrink with the world over the memory already; False: the world sizes replayed did not fit, and
    the search stopped (ZeRO-1 cannot split finer than a parameter tensor)."""


@dataclass(frozen=True)
class MemoryReport(Renders):
    """What `trainspeed memory` reports: the estimate, the batch search, the measurement."""

    model: str
    estimate: MemoryEstimate | None
    """None when the step could not be replayed on meta tensors (then `measured` stands alone)."""
    search: BatchSearch | None
    measured: MeasuredPeak | None
    batch_size: int
    input_shape: list[int]
    input_dtype: str
    notes: list[str] = field(default_factory=list)
    fewest_ranks: list[RanksRow] | None = None
    """With `--fewest-ranks`: for each shard mode, the fewest ranks of the budget's memory that fit the batch."""
    estimate_seconds: float | None = None
    """Wall seconds the estimate took: building the model on fake tensors and replaying its steps (the batch
    search's replays not included)."""

    @property
    def error_pct(self) -> float | None:
        """(predicted - measured) / measured, in percent, when both exist."""
        if self.estimate is None or self.measured is None or self.measured.peak_bytes == 0:
            return None
        return (self.estimate.total_bytes - self.measured.peak_bytes) / self.measured.peak_bytes * 100
