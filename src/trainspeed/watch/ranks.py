"""A watched run under torchrun: DDP's all-reduce per step, FSDP2's all-gathers and reduce-scatters, and every rank's
summary gathered on rank 0 before the script tears its process group down.

`RankTracker` owns the communication timers, the samples of steps' collectives, FSDP2's units and the gathered
summaries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainspeed.stats import median
from trainspeed.watch.collectives import CollectiveTimer, KindStep, summarise
from trainspeed.watch.comm import CommStep, CommTimer
from trainspeed.watch.comm_probe import probe
from trainspeed.watch.dist_result import CallProbe, CollectiveStat, DistRun, bus_bandwidth_gbs
from trainspeed.watch.edges import PhaseEdges
from trainspeed.watch.fsdp_units import UnitsTracker
from trainspeed.watch.gather import gather, rank_stat, this_rank
from trainspeed.watch.result import WatchResult
from trainspeed.watch.samples import Reservoir


class RankTracker:
    def __init__(self, edges: PhaseEdges) -> None:
        """`edges`: the phase edges (a collective the host waits for is the `comm` phase)."""
        self.comm = CommTimer()
        self.collectives = CollectiveTimer(lambda phase: edges.enter(phase), lambda phase: edges.exit(phase))
        self.units = UnitsTracker(lambda: self.collectives.waited_s)
        self.probes: list[CallProbe] = []
        self.place: tuple[int, int] | None = None
        """(rank, world size), read while the process group was up."""
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
        self.collective_steps = Reservoir[dict[str, KindStep]](seed=5)
        self.fsdp_host = Reservoir[dict[str, float]](seed=6)

    def busy(self) -> bool:
        """Collectives finished since the last step's end: the step's end takes them."""
        return bool(self.comm.spans or self.comm.events or self.collectives.calls)

    def quiet_allowed(self) -> bool:
        """No DDP model nor sharded collective seen: steps may be passed over (a quiet run)."""
        return self.comm.backend is None and not self.collectives.used

    def passed_over(self) -> None:
        """Steps were passed over (a quiet run): their collectives are several steps' worth, not one's."""
        self.comm.take()
        self.collectives.take()
        self.units.take_host()

    def install(self, summary: Callable[[], WatchResult]) -> None:
        """Time DDP's all-reduces, and gather every rank's `summary()` just before the script tears its process
        group down."""
        self._summary = summary
        self.comm.install()
        self.collectives.install()
        self.units.install()
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
        self.collectives.uninstall()
        self.units.uninstall()
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
        calls = self.collectives.take()
        host = self.units.take_host()
        if calls and counted:
            self.collective_steps.add(summarise(calls))
            self.fsdp_host.add(host)
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

    def rank_comm(self) -> tuple[float | None, float | None, float | None]:
        """This rank's communication per step, for its summary: DDP's all-reduce, or else the sharded collectives."""
        if self.comm_steps.items or not self.collective_steps.items:
            return self.medians()
        stats = collective_stats(self.collective_steps.items)
        return (sum(s.comm_ms for s in stats), sum(s.exposed_ms for s in stats), sum(s.nbytes for s in stats))

    def gather(self) -> None:
        from trainspeed.distributed.env import timeout_s

        self._gather_done = True
        place = this_rank()
        self.place = place or self.place
        if self.collectives.used:
            self.collectives.configure()
        if place is None or self._summary is None:
            return
        try:
            seconds = min(timeout_s(), 120.0)
        except ValueError:
            seconds = 120.0
        if self.collectives.used and self.collectives.backend == "gloo":  # every rank alike: rank 0's sizes rule
            sizes = {s.kind: int(s.nbytes / s.calls) for s in collective_stats(self.collective_steps.items) if s.calls}
            with self.collectives.untimed():
                self.probes, note = probe(sizes, seconds)
            if note:
                self.notes.append(note)
        stat = rank_stat(place[0], self._summary(), self.rank_comm())
        self.gathered, note = gather(stat, seconds)
        if note:
            self.notes.append(note)

    def part(self, measured: WatchResult) -> DistRun | None:
        """This rank's all-reduce and every rank's summary (on rank 0 after the gather). The bus bandwidth is
        what the least-waiting rank measured: a rank that waits for a slower one sees that wait as all-reduce
        time. The scaling prediction is left to diagnose.scaling (`scaling` empty here)."""
        place = this_rank() or self.place
        comm = self.comm
        sharded = self.collectives
        if place is None and comm.world_size <= 1 and not self.comm_steps.items and self.gathered is None \
                and not sharded.used:
            return None
        rank, world = place if place is not None else (0, max(comm.world_size, sharded.world_size))
        world = max(world, comm.world_size, sharded.world_size)
        comm_ms, exposed_ms, nbytes = self.medians()
        ranks = self.gathered or [rank_stat(rank, measured, self.rank_comm())]
        overlap = (1.0 - exposed_ms / comm_ms) if comm_ms and exposed_ms is not None and comm_ms > 0 else None
        timed = [r for r in ranks if r.comm_ms is not None and r.exposed_ms is not None and r.median_ms
                 and comm_ms is not None]  # DDP's all-reduce (a sharded run's summaries hold its collectives)
        bus = None
        if timed:
            least = min(timed, key=lambda r: r.exposed_ms or 0.0)
            bus = bus_bandwidth_gbs(least.comm_bytes or 0.0, (least.comm_ms or 0.0) / 1e3, world)
        notes = []
        if sharded.cuda_untimed:
            notes.append(f"{sharded.cuda_untimed} collectives on CUDA tensors were not timed (NCCL's host calls "
                         "return before the transfer ends): the comm phase holds DDP's all-reduce only")
        return DistRun(world, comm.backend or sharded.backend, rank, comm.grad_bytes, comm_ms, exposed_ms, overlap,
                       bus, ranks, [], notes, collective_stats(self.collective_steps.items), self.probes,
                       host_ms(self.fsdp_host.items), self.units.part())


def host_ms(steps: list[dict[str, float]]) -> dict[str, float]:
    """The sampled steps' FSDP hook times (seconds per hook) -> per hook, the median milliseconds per step."""
    return {hook: median(s.get(hook, 0.0) * 1e3 for s in steps) or 0.0 for hook in sorted({h for s in steps for h in s})}


def collective_stats(steps: list[dict[str, KindStep]]) -> list[CollectiveStat]:
    """The sampled steps' collectives -> per kind, the medians per step (a step without a kind counts as none)."""
    out = []
    for kind in sorted({k for s in steps for k in s}):
        mine = [s.get(kind, KindStep(0, 0, 0.0, 0.0, 0, 0.0)) for s in steps]

        def med(values: list[float]) -> float:
            return median(values) or 0.0

        out.append(CollectiveStat(kind, med([s.calls for s in mine]), med([s.nbytes for s in mine]),
                                  med([s.comm_s * 1e3 for s in mine]), med([s.exposed_s * 1e3 for s in mine]),
                                  med([s.backward_calls for s in mine]), med([s.backward_exposed_s * 1e3 for s in mine])))
    return out
