"""A run under torchrun: DDP's communication, each rank's summary and the scaling prediction (the ranks tracker's
part of a `WatchResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RankStat:
    """One rank's summary, as rank 0 gathers it under torchrun."""

    rank: int
    host: str
    steps_measured: int
    median_ms: float | None
    phases_ms: dict[str, float]
    """Milliseconds per step in each phase (share x median step)."""
    comm_ms: float | None
    """Median per step: time some gradient all-reduce was in flight."""
    exposed_ms: float | None
    """Median per step: all-reduce time backward could not hide (the `comm` phase)."""
    comm_bytes: float | None
    """Gradient bytes all-reduced per step."""


@dataclass(frozen=True)
class ScalePoint:
    """Predicted (not measured) data-parallel step at a world size, by the ring all-reduce model."""

    world_size: int
    step_ms: float
    comm_ms: float
    exposed_ms: float
    efficiency: float
    """Single-rank step time / predicted step time (1.0: perfect scaling)."""


@dataclass(frozen=True)
class CollectiveStat:
    """Sharded training's collectives of one kind (FSDP2's all-gathers or reduce-scatters), medians per step."""

    kind: str
    """"all_gather" or "reduce_scatter"."""
    calls: float
    nbytes: float
    """Unsharded bytes per step (the all-gathers' outputs, the reduce-scatters' inputs)."""
    comm_ms: float
    """Time some collective of this kind was in flight."""
    exposed_ms: float
    """Time the step waited for them (the host blocked in the call or its wait): part of the `comm` phase."""
    backward_calls: float
    backward_exposed_ms: float
    """Of the above, the calls issued in backward (all-gathers there re-gather what forward resharded)."""


@dataclass(frozen=True)
class CallProbe:
    """One collective timed on its own at the end of the run (watch/comm_probe.py): a measurement, the basis of the
    prediction for larger sharding units."""

    kind: str
    nbytes: int
    """Unsharded bytes of the call."""
    ms: float
    """The fastest of its timed calls."""


@dataclass(frozen=True)
class FsdpLayout:
    """FSDP2's sharding units as the script's `fully_shard` calls made them."""

    units: int
    unit_bytes: list[int]
    """Each unit's own parameters (not a nested unit's), unsharded, in the order they were sharded."""
    root_bytes: int
    resharding: int
    """Units that reshard after forward (FSDP2's default: all but the root), to all-gather again in backward."""
    resharding_bytes: int
    mesh_dims: int
    """2: hybrid sharding (a 2-D mesh: replicate x shard)."""
    param_dtype: str | None
    """MixedPrecisionPolicy's param_dtype (the root's), None: the parameters' own."""
    cpu_offload: bool


@dataclass(frozen=True)
class DistRun:
    """A run under torchrun: DDP's or FSDP's communication, each rank, and the scaling prediction."""

    world_size: int
    backend: str | None
    rank: int
    grad_bytes: int
    comm_ms: float | None
    exposed_ms: float | None
    overlap: float | None
    """Share of the all-reduce time hidden behind backward (this rank)."""
    bus_gbs: float | None
    """Measured all-reduce bus bandwidth (ring: 2(N-1)/N x bytes / time), GB/s; None on one rank."""
    ranks: list[RankStat]
    """Every rank's summary (on rank 0 after the gather; only this rank's otherwise)."""
    scaling: list[ScalePoint]
    notes: list[str] = field(default_factory=list)
    collectives: list[CollectiveStat] = field(default_factory=list)
    """Sharded training's all-gathers and reduce-scatters (FSDP2), per kind; empty under DDP."""
    call_probes: list[CallProbe] = field(default_factory=list)
    """Each kind at the run's call size and at comm_probe.GROUP times it, timed on the ranks (rank 0's)."""
    fsdp_host_ms: dict[str, float] = field(default_factory=dict)
    """FSDP2's hooks' own host work per step (median), less the collectives they waited for, per hook
    (pre_forward, post_forward, pre_backward, post_backward, root_post_backward_final_callback)."""
    fsdp: FsdpLayout | None = None


GROUP = 4
"""Units merged into one in the prediction for larger units."""


def ring_factor(world: int) -> float:
    """Bytes a ring all-reduce moves through each link, per byte reduced: 2(N-1)/N."""
    return 2 * (world - 1) / world if world > 1 else 0.0


def bus_bandwidth_gbs(nbytes: float, comm_s: float, world: int) -> float | None:
    """Measured bus bandwidth (GB/s) of an all-reduce of `nbytes` that took `comm_s` on `world` ranks."""
    if world < 2 or comm_s <= 0 or nbytes <= 0:
        return None
    return ring_factor(world) * nbytes / comm_s / 1e9


def growth(probes: list[CallProbe], kind: str) -> float | None:
    """How much longer a call of `GROUP` times the bytes takes than one of the run's size (from the probe); at least
    1 (a larger call of the same collective costs no less: a ratio under 1 is the probe's noise)."""
    mine = sorted((p for p in probes if p.kind == kind), key=lambda p: p.nbytes)
    if len(mine) < 2 or mine[0].ms <= 0:
        return None
    return max(1.0, mine[-1].ms / mine[0].ms)
