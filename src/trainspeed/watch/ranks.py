"""A watched run under torchrun: DDP's all-reduce per step, and every rank's summary gathered on rank 0 before the
script tears its process group down.

`RankTracker` owns the communication timer, the sample of steps' all-reduces and the gathered summaries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainspeed.stats import median
from trainspeed.watch.comm import CommStep, CommTimer, bus_bandwidth_gbs
from trainspeed.watch.dist_result import DistRun
from trainspeed.watch.gather import gather, rank_stat, this_rank
from trainspeed.watch.result import WatchResult
from trainspeed.watch.stats import Reservoir


class RankTracker:
    def __init__(self) -> None:
        self.comm = CommTimer()
        self.gathered: list[Any] | None = None
        """Every rank's summary (RankStat), on rank 0 once gathered."""
        self.notes: list[str] = []
        self._gather_done = False
        self._undo_destroy: Callable[[], None] | None = None
        self._summary: Callable[[], WatchResult] | None = None
        self.restart()

    def restart(self) -> None:
        """The measured steps start (again): their all-reduces are sampled anew."""
        self.comm_steps = Reservoir[CommStep](seed=4)

    def install(self, summary: Callable[[], WatchResult]) -> None:
        """Time DDP's all-reduces, and gather every rank's `summary()` just before the script tears its process
        group down."""
        self._summary = summary
        self.comm.install()
        try:
            import torch.distributed as dist
        except ImportError:
            return
        if not dist.is_available():
            return
        original = dist.destroy_process_group

        def destroy(group: Any = None) -> None:
            if group is None and not self._gather_done and this_rank() is not None:
                self.gather()
            original(group)

        dist.destroy_process_group = destroy

        def undo() -> None:
            dist.destroy_process_group = original

        self._undo_destroy = undo

    def uninstall(self) -> None:
        """The watch stops: gathered (if not yet, under torchrun) and every patch put back."""
        self.comm.uninstall()
        if not self._gather_done and this_rank() is not None:
            self.gather()
        if self._undo_destroy is not None:
            self._undo_destroy()
            self._undo_destroy = None

    def step_ended(self, charged_s: float, counted: bool) -> float:
        """A kept step ended with all-reduces in flight: keep its all-reduce (`counted`: after the warm-up), and on
        CUDA the steps whose device events have completed (the host did not wait). Returns the seconds of
        exposed all-reduce wait to move out of the phase that was charged `charged_s`."""
        comm = self.comm
        comm.end_step()
        if counted:
            for done in comm.take_device():
                self.comm_steps.add(done)
        step = comm.take()
        if step is None:
            return 0.0
        if counted:
            self.comm_steps.add(step)
        return min(step.exposed_s, charged_s)

    def medians(self) -> tuple[float | None, float | None, float | None]:
        steps = self.comm_steps.items
        if not steps:
            return None, None, None
        return (median(s.comm_s * 1e3 for s in steps), median(s.exposed_s * 1e3 for s in steps),
                median(float(s.nbytes) for s in steps))

    def gather(self) -> None:
        from trainspeed.distributed.env import timeout_s

        self._gather_done = True
        place = this_rank()
        if place is None or self._summary is None:
            return
        stat = rank_stat(place[0], self._summary(), self.medians())
        try:
            seconds = min(timeout_s(), 120.0)
        except ValueError:
            seconds = 120.0
        self.gathered, note = gather(stat, seconds)
        if note:
            self.notes.append(note)

    def part(self, measured: WatchResult) -> DistRun | None:
        """This rank's all-reduce and every rank's summary (on rank 0 after the gather). The bus bandwidth is
        what the least-waiting rank measured: a rank that waits for a slower one sees that wait as all-reduce
        time. The scaling prediction is left to diagnose.scaling (`scaling` empty here)."""
        place = this_rank()
        comm = self.comm
        if place is None and comm.world_size <= 1 and not self.comm_steps.items and self.gathered is None:
            return None
        rank, world = place if place is not None else (0, comm.world_size)
        world = max(world, comm.world_size)
        comm_ms, exposed_ms, nbytes = self.medians()
        ranks = self.gathered or [rank_stat(rank, measured, (comm_ms, exposed_ms, nbytes))]
        overlap = (1.0 - exposed_ms / comm_ms) if comm_ms and exposed_ms is not None and comm_ms > 0 else None
        timed = [r for r in ranks if r.comm_ms is not None and r.exposed_ms is not None and r.median_ms]
        bus = None
        if timed:
            least = min(timed, key=lambda r: r.exposed_ms or 0.0)
            bus = bus_bandwidth_gbs(least.comm_bytes or 0.0, (least.comm_ms or 0.0) / 1e3, world)
        return DistRun(world, comm.backend, rank, comm.grad_bytes, comm_ms, exposed_ms, overlap, bus,
                       ranks, [], [])
