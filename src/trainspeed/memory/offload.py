"""FSDP2's CPU offload (`CPUOffloadPolicy`): what stays on the device when the shards live in host memory.

Under CPUOffloadPolicy the sharded parameters, their gradients and the optimizer's state live in host memory and the
optimizer steps there; the device holds what a unit gathers (its all-gather's output), the step's activations and
temporaries, and each shard on its way (copied in for the all-gather, and the reduce-scatter's output before it
goes out). The replay runs FSDP2 without the policy (its fake world has one kind of device) and sorts its storages
afterwards: the device's peak is the peak of the step's timeline without the host's storages (the adopted
parameter shards and optimizer state, the gradient shards backward left, and what the optimizer's step made), and
the host's is theirs. Left out, and said in a note: the shard-sized copies in flight (one unit's at a time).
"""

from __future__ import annotations

from collections.abc import Iterable

from trainspeed.memory.tracker import Block, LiveBytes

HOST_PHASES = ("params", "optimizer-state", "optimizer")
"""Where a storage born in these phases lives under CPU offload: the host (the parameters' shards adopted before
the step, the optimizer's state, and what its step on the host makes)."""


def peak_of(blocks: Iterable[Block]) -> tuple[int, int]:
    """(peak bytes, the moment) of `blocks`' timeline: a block counts from its birth until its death (alive at
    moment m where born <= m < died), as `LiveBytes.alive_at` has it."""
    events: dict[int, int] = {}
    for b in blocks:
        events[b.born] = events.get(b.born, 0) + b.nbytes
        if b.died is not None:
            events[b.died] = events.get(b.died, 0) - b.nbytes
    live = peak = 0
    at = 0
    for moment in sorted(events):
        live += events[moment]
        if live > peak:
            peak, at = live, moment
    return peak, at


def host_blocks(tracker: LiveBytes, params: set[int], grads: set[int]) -> set[int]:
    """ids of the blocks that live in host memory under CPU offload: the adopted parameters' shards (`params`: their
    storages' keys; buffers stay on the device), the optimizer's state and step, and the gradients' shards
    (`grads`: ids of their blocks)."""
    out = set()
    for b in tracker.history:
        if id(b) in grads or (b.phase == "params" and b.key in params) or b.phase in HOST_PHASES[1:]:
            out.add(id(b))
    return out


def split_peaks(tracker: LiveBytes, host: set[int]) -> tuple[tuple[int, int], int]:
    """((the device's peak, its moment), the host's peak) of the replayed step, the host's storages set apart."""
    device = peak_of(b for b in tracker.history if id(b) not in host)
    return device, peak_of(b for b in tracker.history if id(b) in host)[0]
