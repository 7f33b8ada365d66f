"""`comm_bound` on a sharded run (FSDP2 under torchrun): the step waits for all-gathers and reduce-scatters.

Two levers, each predicted from the run's own figures, the larger one carrying the verdict's prediction:
- larger sharding units (`fully_shard` on every GROUP consecutive units instead of each): the calls fall by the units'
  ratio, each call costs what the end-of-run probe timed for a call GROUP times larger, and FSDP's own per-unit
  host work (copies into and out of the communication buffers, resharding, hooks) falls with the units;
- `reshard_after_forward=False`: the all-gathers backward makes again (measured apart) go, at the price of the
  unsharded parameters held from forward to backward.
"""

from __future__ import annotations

import math

from trainspeed.diagnose.rules.brief import part_of_step
from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.step_model import step_speedup
from trainspeed.diagnose.verdict import Verdict
from trainspeed.watch.dist_result import GROUP, CollectiveStat, DistRun, growth
from trainspeed.watch.result import WatchResult

COMM_SHARE = 0.15
"""The step waits for the collectives this share of its time or more."""
MIN_UNITS = 2 * GROUP
"""Units (the root aside) below which merging them is not offered."""


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:.2f} MiB"


def larger_units(d: DistRun, stats: dict[str, CollectiveStat]) -> tuple[float, str] | None:
    """(ms a step saved, the lever's words) for units GROUP times larger, where the layout and the probe allow."""
    layout = d.fsdp
    if layout is None or layout.units - 1 < MIN_UNITS:
        return None
    nested = layout.units - 1
    after = math.ceil(nested / GROUP) + 1
    ratio = after / layout.units
    saved = 0.0
    for kind, s in stats.items():
        g = growth(d.call_probes, kind)
        if g is None:
            return None
        saved += s.exposed_ms - s.exposed_ms * ratio * g
    host = sum(d.fsdp_host_ms.values())
    saved += host * (1 - ratio)
    largest = max(layout.unit_bytes)
    probes = ", ".join(f"{kind.replace('_', '-')} {g:.2f}x" for kind in stats
                       if (g := growth(d.call_probes, kind)) is not None)
    words = (f"shard in larger units: fully_shard every {GROUP} consecutive units instead of each ({layout.units} units "
             f"-> {after}; predicted {saved:.2f} ms less a step: {GROUP}x fewer collectives, each timed at the end of "
             f"the run at {GROUP}x the bytes ({probes} the time), and FSDP's own per-unit host work, {host:.2f} ms a "
             f"step, falling with the units; the largest unit gathered at once grows from {_mib(largest)} to about "
             f"{_mib(largest * GROUP)})")
    return saved, words


def keep_gathered(d: DistRun, stats: dict[str, CollectiveStat]) -> tuple[float, str] | None:
    """(ms a step saved, the lever's words) for reshard_after_forward=False, where backward gathers again."""
    gather = stats.get("all_gather")
    layout = d.fsdp
    if gather is None or not gather.backward_calls or (layout is not None and not layout.resharding):
        return None
    held = (layout.resharding_bytes * (d.world_size - 1) / d.world_size) if layout is not None else None
    cost = f", holding up to {_mib(held)} more a rank from forward to backward" if held is not None else ""
    host = d.fsdp_host_ms.get("pre_backward", 0.0) + d.fsdp_host_ms.get("post_forward", 0.0)
    words = (f"reshard_after_forward=False: no all-gather in backward (the {gather.backward_calls:.0f} there wait "
             f"{gather.backward_exposed_ms:.2f} ms a step, and FSDP's host work resharding after forward and "
             f"unsharding before backward {host:.2f} ms: predicted {gather.backward_exposed_ms + host:.2f} ms less"
             f"{cost})")
    return gather.backward_exposed_ms + host, words


def sharded_comm(r: WatchResult, c: Context) -> Verdict | None:
    d = r.distributed
    if d is None or not d.collectives or not r.steps.median_ms:
        return None
    step = r.steps.median_ms
    exposed = r.phases["comm"].share * step
    share = exposed / step
    if share < COMM_SHARE:
        return None
    stats = {s.kind: s for s in d.collectives}
    in_flight = sum(s.comm_ms for s in stats.values())
    waited = sum(s.exposed_ms for s in stats.values())
    kinds = "; ".join(f"{s.calls:.0f} {s.kind.replace('_', '-')}s of {_mib(s.nbytes)} in all, {s.exposed_ms:.2f} ms "
                      f"waited ({s.backward_calls:.0f} in backward, {s.backward_exposed_ms:.2f} ms)"
                      for s in stats.values())
    layout = d.fsdp
    units = (f" over {layout.units} sharding units ({layout.resharding} reshard after forward)"
             if layout is not None else "")
    hidden = max(0.0, 1 - waited / in_flight) if in_flight > 0 else 0.0
    evidence = (f"FSDP's collectives{units} on {d.world_size} ranks ({d.backend}): {kinds}; the step waits "
                f"{exposed:.2f} ms of its {step:.2f} ms for them ({share:.0%}), {hidden:.0%} hidden behind compute"
                + (f"; FSDP's own host work around the units takes {sum(d.fsdp_host_ms.values()):.2f} ms a step "
                   "(in forward and backward)" if d.fsdp_host_ms else ""))
    brief = f"the step waits for them {part_of_step(exposed, step)}, {hidden:.0%} hidden behind compute"
    levers = [lever for lever in (larger_units(d, stats), keep_gathered(d, stats)) if lever is not None]
    levers.sort(key=lambda lever: -lever[0])
    words = [w for _, w in levers]
    if hidden < 0.05:
        words.append("with gloo FSDP's collectives block the step; on GPUs (NCCL) they overlap compute, and explicit "
                     "prefetch (set_modules_to_forward_prefetch, set_modules_to_backward_prefetch) starts each one "
                     "earlier")
    if len({s.host for s in d.ranks}) > 1 and (layout is None or layout.mesh_dims < 2):
        words.append("across nodes, hybrid sharding (a 2-D DeviceMesh: shard within a node, replicate across) keeps "
                     "the all-gathers inside a node")
    if not levers:
        words.insert(0, "fewer, larger sharding units (fully_shard on groups of layers) or reshard_after_forward=False")
        return Verdict("comm_bound", evidence, "; or ".join(words) + " (not predicted: the run lacks the figures)",
                       None, title=TITLE, brief=brief, fix="fully_shard groups of layers, or reshard_after_forward=False",
                       unpredicted="the run lacks the collectives' probes at other sizes")
    saved = min(levers[0][0], exposed + sum(d.fsdp_host_ms.values()))
    action = "; or ".join(words) + " (the prediction assumes the first)"
    fix = (f"fully_shard every {GROUP} consecutive layers instead of each" if levers[0][1].startswith("shard in larger")
           else "fully_shard(..., reshard_after_forward=False)")
    return Verdict("comm_bound", evidence, action, step_speedup(r, step, step - saved), title=TITLE, brief=brief,
                   fix=fix)


TITLE = "Waiting for FSDP's all-gathers and reduce-scatters"
