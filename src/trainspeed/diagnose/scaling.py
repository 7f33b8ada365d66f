"""Data-parallel scaling, predicted from one measured run with the ring all-reduce model.

A ring all-reduce of B bytes over N ranks moves 2(N-1)/N x B through each link, so it takes
2(N-1)/N x B / bw, with bw the bus bandwidth (measured on a run of 2 or more ranks as
2(N-1)/N x B / t). DDP starts each bucket's all-reduce as soon as its gradients are ready, so
communication overlaps backward: at a larger N only the part that no longer fits behind backward
is exposed (we assume the share of backward that overlapped in the measured run stays the same).
Every number this module returns is a prediction.
"""

from __future__ import annotations

from trainspeed.watch.result import ScalePoint

WORLD_SIZES = (1, 2, 4, 8, 16, 32, 64)


def ring_factor(world: int) -> float:
    return 2 * (world - 1) / world if world > 1 else 0.0


def bus_bandwidth_gbs(nbytes: float, comm_s: float, world: int) -> float | None:
    """Measured bus bandwidth (GB/s) of an all-reduce of `nbytes` that took `comm_s` on `world` ranks."""
    if world < 2 or comm_s <= 0 or nbytes <= 0:
        return None
    return ring_factor(world) * nbytes / comm_s / 1e9


def predict(compute_ms: float, backward_ms: float, grad_bytes: float, bus_gbs: float,
            worlds: tuple[int, ...] = WORLD_SIZES, hidden_ms: float | None = None) -> list[ScalePoint]:
    """Step time at each world size: compute (what one rank does besides the exposed all-reduce)
    plus the all-reduce time that backward cannot hide. `hidden_ms`: how much communication the
    measured run hid behind backward (default: all of backward can hide it)."""
    room = backward_ms if hidden_ms is None else max(hidden_ms, 0.0)
    points = []
    for n in worlds:
        comm = ring_factor(n) * grad_bytes / (bus_gbs * 1e9) * 1e3
        exposed = max(0.0, comm - room)
        step = compute_ms + exposed
        points.append(ScalePoint(n, step, comm, exposed, compute_ms / step if step > 0 else 1.0))
    return points
