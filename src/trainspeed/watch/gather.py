"""Under torchrun every rank watches itself; rank 0 gathers each rank's summary at the end.

The gather runs when the script tears its process group down (`destroy_process_group`, which
every rank calls at the same point) or, if it never does, when watching stops. It uses a gloo
group of its own with a timeout, so a rank that died ends the gather with a note, not a hang.
"""

from __future__ import annotations

import datetime
import socket
from typing import Any

from trainspeed.errors import first_line
from trainspeed.watch.dist_result import RankStat
from trainspeed.watch.result import WatchResult


def this_rank() -> tuple[int, int] | None:
    """(rank, world size) when a process group is up, else None."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if not (dist.is_available() and dist.is_initialized()):
        return None
    return dist.get_rank(), dist.get_world_size()


def rank_stat(rank: int, measurements: WatchResult, comm: tuple[float | None, float | None, float | None]) -> RankStat:
    m = measurements
    step = m.steps.median_ms or 0.0
    phases = {p: s.share * step for p, s in m.phases.items()}
    comm_ms, exposed_ms, nbytes = comm
    return RankStat(rank, socket.gethostname(), m.steps.measured, m.steps.median_ms, phases, comm_ms, exposed_ms,
                    nbytes)


def gather(stat: RankStat, timeout_s: float) -> tuple[list[RankStat] | None, str | None]:
    """Every rank sends its RankStat; rank 0 gets them all (others get None). A failure is a note."""
    import torch.distributed as dist

    try:
        group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout_s))
        rank, world = dist.get_rank(), dist.get_world_size()
        out: list[Any] | None = [None] * world if rank == 0 else None
        dist.gather_object(stat, out, dst=0, group=group)
        dist.destroy_process_group(group)
    except Exception as e:  # noqa: BLE001 - a dead peer or a torn-down group: report what this rank has
        first = first_line(e, 160)
        return None, f"could not gather the other ranks' measurements: {first}"
    return (list(out) if out is not None else None), None
