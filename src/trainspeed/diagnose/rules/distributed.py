"""Distributed verdicts under torchrun: exposed communication (`comm_bound`: DDP's all-reduce here, FSDP's collectives in
rules/sharded.py) and a slow rank (`straggler`)."""

from __future__ import annotations

from trainspeed.diagnose.rules.brief import ms, of_step
from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.sharded import sharded_comm
from trainspeed.diagnose.rules.step_model import step_speedup
from trainspeed.diagnose.verdict import Verdict
from trainspeed.units import human_bytes
from trainspeed.watch.result import WatchResult

COMM_SHARE = 0.15  # all-reduce exposed after backward for this share of the step
STRAGGLER_EXCESS = 0.10  # a rank busier than the others' median by this much...
STRAGGLER_MIN_MS = 0.05  # ...and by at least this many milliseconds
NO_SYNC_MICRO_BATCHES = 4  # comm_bound's prediction: accumulate this many micro-batches under no_sync()


def comm_bound(r: WatchResult, c: Context) -> Verdict | None:
    d = r.distributed
    if d is not None and d.collectives:  # a sharded run (FSDP2): its all-gathers and reduce-scatters
        return sharded_comm(r, c)
    if d is None or d.world_size < 2 or not r.steps.median_ms or d.comm_ms is None:
        return None
    step = r.steps.median_ms
    exposed = r.phases["comm"].share * step
    comm = d.comm_ms
    timed = [s for s in d.ranks if s.exposed_ms is not None and s.comm_ms is not None]
    if len(timed) > 1:  # the least-waiting rank saw the transfer alone; the others also waited for a slower rank
        least = min(timed, key=lambda s: s.exposed_ms or 0.0)
        exposed = min(exposed, least.exposed_ms or 0.0)
        comm = least.comm_ms if least.comm_ms is not None else comm
    share = exposed / step
    if share < COMM_SHARE:
        return None
    evidence = (f"the gradient all-reduce ({human_bytes(d.grad_bytes)} over {d.world_size} ranks, {d.backend}) takes "
                f"{comm:.2f} ms per step and {exposed:.2f} ms of the {step:.2f} ms step ({share:.0%}) wait for it "
                f"after backward; {max(0.0, 1 - exposed / comm) if comm else 0.0:.0%} of it was hidden behind backward")
    k = NO_SYNC_MICRO_BATCHES
    action = (f"hide or thin out the all-reduce: accumulate gradients over {k} micro-batches with DDP's no_sync() on all "
              "but the last (one all-reduce per optimizer step; the prediction assumes this), or a larger batch per rank "
              "(more compute per byte sent), or a smaller bucket_cap_mb so reductions start earlier in backward")
    return Verdict("comm_bound", evidence, action, step_speedup(r, step, step - exposed * (1 - 1 / k)),
                   title="Waiting for the gradient all-reduce",
                   brief=f"the all-reduce of {human_bytes(d.grad_bytes)} waits {of_step(exposed, step)}",
                   fix=f"with model.no_sync(): on {k - 1} of every {k} micro-batches (one all-reduce a step)")


def straggler(r: WatchResult, c: Context) -> Verdict | None:
    """One rank busier than the others: under DDP every rank then waits for it in each all-reduce."""
    d = r.distributed
    if d is None or len(d.ranks) < 2 or not r.steps.median_ms:
        return None
    busy = {s.rank: (s.median_ms or 0.0) - (s.exposed_ms or 0.0) for s in d.ranks}
    slow = max(busy, key=busy.__getitem__)
    others = sorted(v for k, v in busy.items() if k != slow)
    typical = others[len(others) // 2] if len(others) % 2 else (others[len(others) // 2 - 1] + others[len(others) // 2]) / 2
    excess = busy[slow] - typical
    if typical <= 0 or excess < STRAGGLER_EXCESS * typical or excess < STRAGGLER_MIN_MS:
        return None
    by_rank = {s.rank: s for s in d.ranks}
    slow_stat = by_rank[slow]
    rest = [s for s in d.ranks if s.rank != slow]

    def others_ms(phase: str) -> float:
        values = sorted(s.phases_ms.get(phase, 0.0) for s in rest)
        return values[len(values) // 2]

    gaps = {p: ms - others_ms(p) for p, ms in slow_stat.phases_ms.items() if p != "comm"}
    worst = max(gaps, key=gaps.__getitem__)
    waits = ", ".join(f"rank {s.rank} {s.exposed_ms:.2f} ms" for s in rest if s.exposed_ms is not None)
    evidence = (f"rank {slow} ({slow_stat.host}) is busy {busy[slow]:.2f} ms per step against {typical:.2f} ms on the "
                f"other ranks (+{excess / typical:.0%}); its {worst} phase takes {gaps[worst]:.2f} ms more"
                + (f"; the others wait for it in the all-reduce ({waits})" if waits else ""))
    action = (f"make rank {slow}'s {worst} as fast as the others': work done on that rank only (logging, evaluation, "
              "checkpoints on rank 0 belong outside the step or in a background thread), an uneven data shard or "
              "DataLoader, or a slower or shared device")
    return Verdict("straggler", evidence, action, step_speedup(r, r.steps.median_ms, r.steps.median_ms - excess),
                   title=f"Rank {slow} is slower than the others",
                   brief=f"rank {slow} is busy {ms(busy[slow])} a step against {ms(typical)}; its {worst} +{ms(gaps[worst])}",
                   fix=f"move the work only rank {slow} does in {worst} out of the step")
