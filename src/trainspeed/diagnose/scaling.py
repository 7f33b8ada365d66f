"""Data-parallel scaling, predicted from one measured run with the ring all-reduce model.

A ring all-reduce of B bytes over N ranks moves 2(N-1)/N x B through each link, so it takes
2(N-1)/N x B / bw, with bw the bus bandwidth (measured on a run of 2 or more ranks as
2(N-1)/N x B / t). DDP starts each bucket's all-reduce as soon as its gradients are ready, so
communication overlaps backward: at a larger N only the part that no longer fits behind backward
is exposed (we assume the share of backward that overlapped in the measured run stays the same).
Every number this module returns is a prediction.
"""

from __future__ import annotations

import dataclasses

from trainspeed.watch.dist_result import ScalePoint, bus_bandwidth_gbs, ring_factor
from trainspeed.watch.result import WatchResult

__all__ = ["WORLD_SIZES", "bus_bandwidth_gbs", "predict", "ring_factor", "with_scaling"]

WORLD_SIZES = (1, 2, 4, 8, 16, 32, 64)


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


def with_scaling(result: WatchResult) -> WatchResult:
    """The run with its data-parallel scaling predicted (`DistRun.scaling`), where it ran under torchrun. The
    transfer is what the least-waiting rank measured, a balanced job's compute the ranks' median busy time
    (a rank that waits for a slower one sees that wait as all-reduce time). On one rank there is no bandwidth
    to measure: a note says so."""
    d = result.distributed
    if d is None or d.scaling:
        return result
    timed = [r for r in d.ranks if r.comm_ms is not None and r.exposed_ms is not None and r.median_ms]
    scaling: list[ScalePoint] = []
    notes = list(d.notes)
    if timed and d.bus_gbs and result.steps.median_ms:
        least = min(timed, key=lambda r: r.exposed_ms or 0.0)
        busy = sorted((r.median_ms or 0.0) - (r.exposed_ms or 0.0) for r in timed)
        compute = busy[len(busy) // 2]
        own = next((r.comm_bytes for r in d.ranks if r.rank == d.rank), None)
        if compute and least.comm_ms is not None and least.exposed_ms is not None:
            backward = result.phases["backward"].share * result.steps.median_ms
            scaling = predict(compute, backward, float(d.grad_bytes or own or 0), d.bus_gbs,
                              hidden_ms=least.comm_ms - least.exposed_ms)
    elif d.world_size < 2:
        notes.append("one rank: no all-reduce bandwidth to measure, so no scaling prediction; run with "
                     "--nproc-per-node 2 or more")
    return dataclasses.replace(result, distributed=dataclasses.replace(d, scaling=scaling, notes=notes))
