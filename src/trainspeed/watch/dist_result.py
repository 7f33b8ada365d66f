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
class DistRun:
    """A run under torchrun: DDP's communication, each rank, and the scaling prediction."""

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
