"""A watched run under torchrun: DDP's all-reduce per step, and every rank's summary gathered on
rank 0 before the script tears its process group down.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainspeed.watch.comm import bus_bandwidth_gbs
from trainspeed.watch.gather import gather, rank_stat, this_rank
from trainspeed.watch.result import (
    DistRun,
    WatchResult,
)
from trainspeed.watch.stats import median

if TYPE_CHECKING:
    from trainspeed.watch.session import Watcher


def _watch_destroy(self: Watcher) -> None:
    """Gather every rank's summary just before the script tears its process group down."""
    try:
        import torch.distributed as dist
    except ImportError:
        return
    if not dist.is_available():
        return
    original = dist.destroy_process_group

    def destroy(group: Any = None) -> None:
        if group is None and not self._gather_done and this_rank() is not None:
            self._gather()
        original(group)

    dist.destroy_process_group = destroy

    def undo() -> None:
        dist.destroy_process_group = original

    self._undo_destroy = undo


def _comm_medians(self: Watcher) -> tuple[float | None, float | None, float | None]:
    steps = self.comm_steps.items
    if not steps:
        return None, None, None
    return (median(s.comm_s * 1e3 for s in steps), median(s.exposed_s * 1e3 for s in steps),
            median(float(s.nbytes) for s in steps))


def _gather(self: Watcher) -> None:
    from trainspeed.distributed.env import timeout_s

    self._gather_done = True
    place = this_rank()
    if place is None:
        return
    stat = rank_stat(place[0], self.measurements(gathering=True), self._comm_medians())
    try:
        seconds = min(timeout_s(), 120.0)
    except ValueError:
        seconds = 120.0
    self.gathered, note = gather(stat, seconds)
    if note:
        self.notes.append(note)


def _dist_run(self: Watcher, measured: WatchResult) -> DistRun | None:
    """This rank's all-reduce and every rank's summary (on rank 0 after the gather). The bus bandwidth is
    what the least-waiting rank measured: a rank that waits for a slower one sees that wait as all-reduce
    time. The scaling prediction is left to diagnose.scaling (`scaling` empty here)."""
    place = this_rank()
    if place is None and self.comm.world_size <= 1 and not self.comm_steps.items and self.gathered is None:
        return None
    rank, world = place if place is not None else (0, self.comm.world_size)
    world = max(world, self.comm.world_size)
    comm_ms, exposed_ms, nbytes = self._comm_medians()
    ranks = self.gathered or [rank_stat(rank, measured, (comm_ms, exposed_ms, nbytes))]
    overlap = (1.0 - exposed_ms / comm_ms) if comm_ms and exposed_ms is not None and comm_ms > 0 else None
    timed = [r for r in ranks if r.comm_ms is not None and r.exposed_ms is not None and r.median_ms]
    bus = None
    if timed:
        least = min(timed, key=lambda r: r.exposed_ms or 0.0)
        bus = bus_bandwidth_gbs(least.comm_bytes or 0.0, (least.comm_ms or 0.0) / 1e3, world)
    return DistRun(world, self.comm.backend, rank, self.comm.grad_bytes, comm_ms, exposed_ms, overlap, bus,
                   ranks, [], [])


def _comm_step(self: Watcher, phases: dict[str, float]) -> None:
    """Move this step's exposed all-reduce wait out of the phase the clock charged it to (host
    spans); on CUDA keep the steps whose device events have completed (the host did not wait)."""
    self.comm.end_step()
    counted = self.steps_seen >= self.warmup
    if counted:
        for done in self.comm.take_device():
            self.comm_steps.add(done)
    step = self.comm.take()
    if step is None:
        return
    if counted:
        self.comm_steps.add(step)
    inside = "backward" if self.detailed else "other"  # on edges-only steps backward is not split out
    moved = min(step.exposed_s, phases[inside])
    phases[inside] -= moved
    phases["comm"] += moved
    calls = self.clock.call_sums
    if self.detailed and calls is not None:  # the clock has summed this detailed step already
        calls[inside] -= moved
