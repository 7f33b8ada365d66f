"""What one sharded collective costs at the run's call size and at a larger one, measured on the ranks themselves.

Run by every rank at the same point (as the script tears its process group down, before the ranks' summaries are
gathered), on a gloo group of its own with a timeout: each kind of collective the run made (all-gather,
reduce-scatter), at the median call size of the run and at `GROUP` times it (the size of a sharding unit of
`GROUP` of the run's units), `REPS` times each, the two sizes alternated; the fastest of each (a call's time holds
the wait for the slowest rank to arrive, which a scheduling hiccup on a shared machine stretches by milliseconds).
The ratio of the two is how a collective's time grows with its bytes on these ranks and this transport: the basis
of the prediction for larger units (fewer, bigger calls). Rank 0's sizes are everyone's (broadcast first), so the
ranks always run the same calls.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

import torch

from trainspeed.errors import first_line
from trainspeed.watch.dist_result import GROUP, CallProbe

REPS = 41


def _call(kind: str, out: torch.Tensor, inp: torch.Tensor, group: Any) -> None:
    import torch.distributed as dist

    if kind == "all_gather":
        fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    else:
        fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    fn(out, inp, group=group)


def probe(sizes: dict[str, int], timeout_s: float) -> tuple[list[CallProbe], str | None]:
    """`sizes`: kind -> the run's median call bytes (unsharded). Every rank calls this at once."""
    import torch.distributed as dist

    try:
        group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout_s))
        agreed: list[Any] = [sorted(sizes.items())]
        dist.broadcast_object_list(agreed, src=0, group=group)
        world = dist.get_world_size(group)
        out = []
        for kind, nbytes in agreed[0]:
            pairs = []
            for factor in (1, GROUP):
                numel = max(world, nbytes * factor // 4 // world * world)
                full, shard = torch.zeros(numel), torch.zeros(numel // world)
                pairs.append((full, shard) if kind == "all_gather" else (shard, full))
                _call(kind, *pairs[-1], group)  # the first call of a size sets its buffers up
            times: list[list[float]] = [[], []]
            for _ in range(REPS):
                for i, (out_t, in_t) in enumerate(pairs):
                    t0 = time.perf_counter()
                    _call(kind, out_t, in_t, group)
                    times[i].append(time.perf_counter() - t0)
            for (out_t, in_t), taken in zip(pairs, times):
                numel = max(out_t.numel(), in_t.numel())
                out.append(CallProbe(kind, numel * 4, min(taken) * 1e3))
        dist.destroy_process_group(group)
    except Exception as e:  # noqa: BLE001 - a dead peer or a torn-down group: no probe, said so
        return [], f"could not time the collectives at a larger size: {first_line(e, 160)}"
    return out, None
