"""`world-size`: the same training on K data-parallel ranks (torchrun + DDP), measured.

Each value K is launched as torchrun would run a user's script: K processes, DDP, each rank
taking its 1/K of every global batch (the seed's data parallelism; the training is the one
process's). On the CPU the ranks share the cores (physical cores / K threads each, gloo over
loopback); on CUDA each rank has a GPU of its own (NCCL), so K is at most the GPUs visible.

Beside time per step: samples/s, speedup and efficiency against one rank, and all-reduces of the
gradient's size and of one value timed on their own (a ring's per-hop latency and per-link
bandwidth). World sizes this machine cannot run are predicted, labelled so: each rank's compute
is one process's step on batch/K, measured (the one-rank launch times batch/2 ... batch/64 too),
plus the ring all-reduce of the gradient, 2(K-1) hops x latency + 2(K-1)/K x bytes / bandwidth,
assumed not hidden behind backward, plus DDP's own per-step cost where it can be measured apart
(CUDA: from the largest world size run). On the CPU the predicted rows are "K machines" like this
one, since K ranks on one CPU share its cores.
"""

from __future__ import annotations

import os
from functools import partial

import torch

from trainspeed.diagnose.scaling import bus_bandwidth_gbs, ring_factor
from trainspeed.errors import UsageError
from trainspeed.names import KNOB_SUMMARIES
from trainspeed.stats import median
from trainspeed.sweep.arm import ArmConfig
from trainspeed.sweep.knobs.base import Knob, SweepContext, positive_int
from trainspeed.sweep.result import SweepPoint, SweepResult
from trainspeed.sweep.runner import ArmSpec
from trainspeed.sweep.world_arm import WorldArm, WorldConfig

LATENCY_BOUND_BYTES = 2**20
"""Below this gradient size the all-reduce's byte term is not reported as a bandwidth."""


def portable_spec(spec: str) -> str:
    """The workload spec as other processes (started elsewhere) can resolve it: FILE.py made absolute."""
    head, sep, rest = spec.partition(":")
    if sep and head.endswith(".py") and os.path.exists(head):
        return f"{os.path.abspath(head)}:{rest}"
    return spec


def comm_model(points: dict[int, tuple[float, float]], grad_bytes: float) -> tuple[float, float] | None:
    """(latency_ms per ring hop, ms per byte per link) of a ring all-reduce, from world sizes K > 1
    with (ms for the gradient's bytes, ms for one value): a ring makes 2(K-1) hops, each paying the
    latency, and moves 2(K-1)/K x bytes through every link."""
    hops = [one / (2 * (k - 1)) for k, (_, one) in points.items() if k > 1]
    per_byte = [max(full - one, 0.0) / (ring_factor(k) * grad_bytes) for k, (full, one) in points.items()
                if k > 1 and grad_bytes > 0]
    if not hops:
        return None
    return median(hops) or 0.0, median(per_byte) or 0.0


def comm_ms(k: int, latency_ms: float, ms_per_byte: float, grad_bytes: float) -> float:
    return 2 * (k - 1) * latency_ms + ring_factor(k) * grad_bytes * ms_per_byte if k > 1 else 0.0


class WorldSize(Knob):
    name = "world-size"
    summary = KNOB_SUMMARIES[name]

    def _ranks_here(self, ctx: SweepContext) -> int:
        if ctx.device == "cuda":
            return torch.cuda.device_count()
        return ctx.logical_threads

    def normalise(self, value: str, ctx: SweepContext) -> str:
        k = positive_int(self.name, value, "a number of ranks")
        most = self._ranks_here(ctx)
        if k > most:
            where = (f"{most} GPU(s) are visible and each rank needs its own" if ctx.device == "cuda"
                     else f"this machine has {most} CPU threads")
            raise UsageError(f"{self.name}: {k} ranks cannot run here: {where} (larger world sizes are predicted "
                             "from the ones measured)")
        return str(k)

    def defaults(self, ctx: SweepContext) -> list[str]:
        most = ctx.physical_cores if ctx.device == "cpu" else self._ranks_here(ctx)
        sizes = [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= max(most, 1)]
        if most > sizes[-1]:
            sizes.append(most)
        return [str(k) for k in sizes]

    def threads(self, k: int, ctx: SweepContext) -> int:
        """Intra-op threads per rank: the physical cores shared out on the CPU; torch's default on CUDA."""
        return max(1, ctx.physical_cores // k) if ctx.device == "cpu" else 0

    def arms(self, values: list[str], ctx: SweepContext) -> list[ArmSpec]:
        if not ctx.from_spec:
            raise UsageError(f"{self.name}: the ranks are separate processes and build the workload themselves: give "
                             "it as a spec (a built-in name or FILE.py:FACTORY), not a Workload object")
        spec = portable_spec(ctx.spec)

        def config(k: int) -> WorldConfig:  # one rank also times one process on batch/K, for the prediction
            return WorldConfig(spec, k, ctx.device, self.threads(k, ctx), ctx.steps if k == 1 else 0)

        return [ArmSpec(v, ctx.workload, ArmConfig(device=ctx.device), make=partial(WorldArm, config(int(v))))
                for v in values]

    def analyse(self, result: SweepResult, ctx: SweepContext) -> None:
        measured = {int(p.value): p for p in result.points if p.ok and not p.predicted}
        batch = next((s.get("batch_size") for s in ctx.setups.values() if s.get("batch_size")), None)
        one = measured.get(1)
        for k, p in measured.items():
            step_ms = p.median_s / ctx.steps * 1e3  # type: ignore[operator]
            p.extras["step_ms"] = step_ms
            if batch:
                p.extras["samples_per_s"] = batch / step_ms * 1e3
            if one is not None:
                p.extras["speedup"] = one.median_s / p.median_s  # type: ignore[operator]
                p.extras["efficiency"] = p.extras["speedup"] / k
            if k > 1 and p.extras.get("allreduce_ms") and p.extras.get("grad_bytes"):
                p.extras["bus_gbs"] = bus_bandwidth_gbs(p.extras["grad_bytes"], p.extras["allreduce_ms"] / 1e3, k)
        self._predict(result, ctx, measured, batch)
        self._advise(result, ctx, measured)

    def _predict(self, result: SweepResult, ctx: SweepContext, measured: dict[int, SweepPoint],
                 batch: int | None) -> None:
        grad = next((p.extras["grad_bytes"] for p in measured.values() if p.extras.get("grad_bytes")), None)
        timed = {k: (p.extras["allreduce_ms"], p.extras["allreduce_one_ms"]) for k, p in measured.items()
                 if k > 1 and "allreduce_ms" in p.extras and "allreduce_one_ms" in p.extras}
        comm = comm_model(timed, grad) if grad else None
        per_rank = {int(k): ms for k, ms in (ctx.setups.get("1") or {}).get("per_rank_ms", {}).items()}
        if comm is None or grad is None:
            result.notes.append("no world size above 1 was measured, so there is no all-reduce to predict larger "
                                "ones from")
            return
        if 1 not in measured or not per_rank:
            result.notes.append("one rank was not measured, so there is no compute per rank to predict from")
            return
        latency, per_byte = comm
        cpu = ctx.device == "cpu"
        overhead = 0.0
        if not cpu:  # DDP's own cost per step (bucket copies, hooks), from the largest world size measured
            k = max((k for k in measured if k > 1 and k in per_rank), default=None)
            if k is not None:
                overhead = max(0.0, measured[k].extras["step_ms"] - per_rank[k] - comm_ms(k, latency, per_byte, grad))
        link_gbs = 1 / per_byte / 1e6 if per_byte > 0 else None
        result.findings["scaling_model"] = {
            "per_rank_ms": {str(k): v for k, v in per_rank.items()}, "overhead_ms": overhead,
            "hop_latency_ms": latency, "link_gbs": link_gbs if grad >= LATENCY_BOUND_BYTES else None, "grad_bytes": grad,
            "ranks": "machines like this one" if cpu else "GPUs like this one", "predicted": True}
        base = measured[1].extras["step_ms"]
        for k, compute in sorted(per_rank.items()):
            if not cpu and k <= max(measured):
                continue
            c = comm_ms(k, latency, per_byte, grad)
            step = compute + c + overhead
            extras = {"step_ms": step, "allreduce_ms": c, "speedup": base / step, "efficiency": base / step / k}
            if batch:
                extras["samples_per_s"] = batch / step * 1e3
            value = f"{k} machines" if cpu else str(k)
            result.points.append(SweepPoint(value, step / 1e3 * ctx.steps, None, None, True, predicted=True,
                                            extras=extras))
        if grad < LATENCY_BOUND_BYTES:  # too few bytes for the difference of two timings to be a bandwidth
            term = (f"{ring_factor(2) * grad * per_byte * 1e3:.0f} us for the bytes at 2 ranks (latency-bound at "
                    f"{int(grad):,} bytes: no bandwidth to read from it)")
        else:
            term = f"bytes at {link_gbs:.2f} GB/s per link" if link_gbs else "bytes (too fast to see at this size)"
        ring = (f"a ring all-reduce of {grad / 2**20:.2f} MiB: 2(K-1) hops x {latency * 1e3:.0f} us + 2(K-1)/K x "
                f"{term}, measured here, assumed not hidden behind backward")
        if cpu:
            result.notes.append(
                "'K machines' rows are predicted: K ranks each on a machine like this one (all its cores), each "
                "step = one process's measured step on batch/K + " + ring + "; the bandwidth was measured over "
                "loopback between processes: across machines it is the network's, and DDP's own per-step cost is "
                "not included (on one CPU it cannot be told apart from the ranks sharing the cores)")
        else:
            result.notes.append(
                f"larger world sizes are predicted: each rank a GPU like these, step = one process's measured step "
                f"on batch/K + {ring} + {overhead:.3f} ms of DDP's own cost per step (from the largest world size "
                "measured); across nodes the bandwidth is the network's")

    def _advise(self, result: SweepResult, ctx: SweepContext, measured: dict[int, SweepPoint]) -> None:
        if ctx.device == "cpu" and len(measured) > 1:
            result.notes.append("on one CPU the ranks share its cores (threads per rank = physical cores / K): more "
                                "ranks pay off only where one process cannot keep the cores busy")
        if not result.best or len(measured) < 2:
            return
        best, one = measured[int(result.best)], measured.get(1)
        if one is None:
            result.recommend(f"{result.best} ranks: the fastest world size measured")
            return
        if best is one:
            others = sorted(k for k in measured if k > 1)
            slower = ", ".join(f"{k} ranks {one.median_s / measured[k].median_s:.2f}x" for k in others)  # type: ignore[operator]
            machines = [p for p in result.points if p.predicted and p.value.endswith("machines")]
            top = max(machines, key=lambda p: p.extras["speedup"], default=None)
            more = (f"; on {top.value} like this one it is predicted to run {top.extras['speedup']:.2f}x the speed of one"
                    if top is not None and top.extras["speedup"] > 1.2 else
                    "; the all-reduce outweighs the split work: grow the batch per rank first")
            result.recommend(f"stay on one process here: more ranks do not pay ({slower} the speed of one){more}")
            return
        if "1" in result.same_as_best:
            result.recommend(f"no measurable gain: {result.best} ranks ran {best.extras['speedup']:.2f}x the speed "
                                     "of one process, within the noise of the trials; stay on one")
            return
        result.recommend(f"{result.best} ranks: {best.extras['speedup']:.2f}x the speed of one process "
                                 f"({best.extras['efficiency']:.0%} efficiency) for the same training")
