"""Knobs that trade time for memory: gradient accumulation and activation checkpointing."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from trainspeed.errors import UsageError
from trainspeed.names import KNOB_SUMMARIES
from trainspeed.sweep.knobs.base import Knob, OnOffKnob, SweepContext, base_config, positive_int
from trainspeed.sweep.result import SweepResult
from trainspeed.units import human_bytes
from trainspeed.workloads.workload import Workload, data_length


def _peaks(result: SweepResult, ctx: SweepContext) -> None:
    for p in result.points:
        if p.ok:
            p.extras["step_ms"] = p.median_s / ctx.steps * 1e3  # type: ignore[operator]
            peak = ctx.setups.get(p.value, {}).get("peak_bytes")
            if peak is not None:
                p.extras["peak_bytes"] = peak


def accumulated_gradients_differ(workload: Workload, data: Any, batch: int, k: int) -> float:
    """Largest |difference| between the gradients of one batch and of the same batch in k
    micro-batches (each loss divided by k), relative to the largest gradient entry. On the CPU, fp32."""
    if not isinstance(data, tuple):
        items = [data[i] for i in range(batch)]
        data = tuple(torch.stack([torch.as_tensor(it[j]) for it in items]) for j in range(len(items[0])))
    tensors = tuple(t[:batch] for t in data)
    loss_fn = workload.loss()

    def grads(parts: int) -> list[torch.Tensor]:
        model = workload.model().train()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            for chunk in zip(*(t.chunk(parts) for t in tensors)):
                *inputs, target = chunk
                (loss_fn(model(*inputs), target) / parts).backward()
        return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]

    whole, split = grads(1), grads(k)
    scale = max(float(g.abs().max()) for g in whole) or 1.0
    return max(float((a - b).abs().max()) for a, b in zip(whole, split)) / scale


def _has_batchnorm(workload: Workload) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in workload.model().modules())


class Accumulate(Knob):
    name = "accumulate"
    summary = KNOB_SUMMARIES[name]

    def _batch(self, ctx: SweepContext) -> int:
        return ctx.workload.batch_size or data_length(ctx.data())

    def normalise(self, value: str, ctx: SweepContext) -> str:
        k = positive_int(self.name, value)
        if self._batch(ctx) % k:
            raise UsageError(f"{self.name}: the batch of {self._batch(ctx)} does not split into {k} equal "
                             "micro-batches")
        return str(k)

    def defaults(self, ctx: SweepContext) -> list[str]:
        b = self._batch(ctx)
        return [str(k) for k in (1, 2, 4, 8, 16) if b % k == 0 and k <= b]

    def config(self, value: str, ctx: SweepContext):  # noqa: ANN201
        return base_config(ctx, accumulate=int(value), measure_memory=True)

    def analyse(self, result: SweepResult, ctx: SweepContext) -> None:
        _peaks(result, ctx)
        b = self._batch(ctx)
        diffs = {p.value: accumulated_gradients_differ(ctx.workload, ctx.data(), b, int(p.value))
                 for p in result.points if p.value != "1"}
        result.findings["gradient_rel_diff"] = diffs
        if diffs and _has_batchnorm(ctx.workload):
            result.notes.append("the model has BatchNorm: its statistics are per micro-batch, so accumulated "
                                "gradients differ from the whole batch's by design")
        ok = {p.value: p for p in result.points if p.ok}
        if "1" not in ok or len(ok) < 2:
            return
        base = ok["1"]
        lines = []
        for v, p in ok.items():
            if v == "1" or "peak_bytes" not in p.extras or "peak_bytes" not in base.extras:
                continue
            lines.append(f"K={v}: {human_bytes(p.extras['peak_bytes'])} peak "
                         f"({p.extras['peak_bytes'] / base.extras['peak_bytes']:.0%} of K=1) for "
                         f"{p.median_s / base.median_s:.2f}x the time")  # type: ignore[operator]
        worst = max(diffs.values(), default=0.0)
        result.recommend("; ".join(lines) + f". Gradients match the whole batch's to {worst:.1e} "
                                 "(relative): accumulate only when the batch does not fit")


class ActivationCheckpointing(OnOffKnob):
    name = "activation-checkpointing"
    summary = KNOB_SUMMARIES[name]

    def config(self, value: str, ctx: SweepContext):  # noqa: ANN201
        return base_config(ctx, checkpointing=value == "on", measure_memory=True)

    def analyse(self, result: SweepResult, ctx: SweepContext) -> None:
        _peaks(result, ctx)
        ok = {p.value: p for p in result.points if p.ok}
        if "on" not in ok or "off" not in ok or "peak_bytes" not in ok["on"].extras:
            return
        on, off = ok["on"], ok["off"]
        saved = off.extras["peak_bytes"] - on.extras["peak_bytes"]
        paid = on.median_s / off.median_s - 1  # type: ignore[operator]
        result.findings.update(memory_saved_bytes=saved, memory_saved_share=saved / off.extras["peak_bytes"],
                               time_paid_share=paid)
        result.recommend(f"checkpointing saved {human_bytes(saved)} ({saved / off.extras['peak_bytes']:.0%} "
                                 f"of the peak) for {paid:+.0%} time per step: worth it only when the memory buys "
                                 "a larger batch or a larger model")
