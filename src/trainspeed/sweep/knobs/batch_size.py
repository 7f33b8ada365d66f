"""`batch-size`: throughput, step time and peak memory per batch, up to the largest that fits."""

from __future__ import annotations

from typing import Any

import psutil
import torch
from torch.utils.data import Dataset

from trainspeed.names import KNOB_SUMMARIES
from trainspeed.sweep.knobs.base import Knob, SweepContext, base_config, positive_int
from trainspeed.sweep.result import SweepPoint, SweepResult
from trainspeed.sweep.stats import knee
from trainspeed.units import human_bytes
from trainspeed.workloads.workload import Workload, data_length


def _sample(data: Any) -> tuple[torch.Tensor, ...]:
    if isinstance(data, Dataset):
        return tuple(torch.as_tensor(t) for t in data[0])
    return tuple(t[0] for t in data)


def largest_fit(workload: Workload, device: str, data: Any) -> tuple[int | None, int, str]:
    """(largest batch predicted to fit with a 10% margin, budget bytes, note) by the memory estimator."""
    from trainspeed.memory.estimate import EstimateError, Estimator
    from trainspeed.memory.maxbatch import search_max_batch

    budget = (int(torch.cuda.mem_get_info()[0]) if device == "cuda" else int(psutil.virtual_memory().available))
    *inputs, _ = _sample(data)

    def make(b: int) -> tuple[torch.Tensor, ...]:
        return tuple(t.unsqueeze(0).expand(b, *t.shape).clone() for t in inputs)

    try:
        est = Estimator(workload.model, make, workload.optimizer, device=device, warm_batch=8)
        search = search_max_batch(est.peak, est.estimate(8), budget)
    except (EstimateError, RuntimeError, TypeError, ValueError) as e:
        return None, budget, f"largest batch not estimated: {e}"
    return search.max_batch, budget, ""


def fit_for(ctx: SweepContext) -> tuple[int | None, int, str]:
    """largest_fit for the sweep's workload, estimated once per sweep."""
    return ctx.fitting(lambda: largest_fit(ctx.workload, ctx.device, ctx.data()))


def throughput(p: SweepPoint, steps: int) -> tuple[float, float, float]:
    b = int(p.value) * steps
    assert p.median_s and p.ci_low and p.ci_high
    return b / p.median_s, b / p.ci_high, b / p.ci_low


class BatchSize(Knob):
    name = "batch-size"
    summary = KNOB_SUMMARIES[name]

    def score(self, p: SweepPoint, steps: int) -> tuple[float, float, float]:
        return throughput(p, steps)

    def normalise(self, value: str, ctx: SweepContext) -> str:
        return str(positive_int(self.name, value))

    def defaults(self, ctx: SweepContext) -> list[str]:
        own = ctx.workload.batch_size or data_length(ctx.data())
        top = own * 16
        fit, _, _ = fit_for(ctx)
        if fit is not None:
            top = min(top, fit)
        if isinstance(ctx.data(), Dataset):
            top = min(top, data_length(ctx.data()))
        values, b = [], max(1, own // 16)
        while b <= top:
            values.append(b)
            b *= 2
        if own <= top and own not in values:
            values = sorted(values + [own])
        return [str(v) for v in values] or [str(own)]

    def config(self, value: str, ctx: SweepContext):  # noqa: ANN201
        return base_config(ctx, batch_size=int(value), measure_memory=True)

    def analyse(self, result: SweepResult, ctx: SweepContext) -> None:
        ok = [p for p in result.points if p.ok]
        for p in ok:
            p.extras["samples_per_s"], _, _ = throughput(p, ctx.steps)
            p.extras["step_ms"] = p.median_s / ctx.steps * 1e3  # type: ignore[operator]
            peak = ctx.setups.get(p.value, {}).get("peak_bytes")
            if peak is not None:
                p.extras["peak_bytes"] = peak
        fit, budget, note = fit_for(ctx)
        result.findings["largest_fit"] = {"batch": fit, "budget_bytes": budget, "predicted": True}
        if note:
            result.notes.append(note)
        if not ok:
            return
        ordered = sorted(ok, key=lambda p: int(p.value))
        i = knee([p.extras["samples_per_s"] for p in ordered])
        top = max(ordered, key=lambda p: p.extras["samples_per_s"])
        if i is None:
            return
        k = ordered[i]
        result.findings["knee"] = k.value
        mem = ""
        if "peak_bytes" in k.extras and "peak_bytes" in top.extras and k is not top:
            mem = f", with {human_bytes(k.extras['peak_bytes'])} peak instead of {human_bytes(top.extras['peak_bytes'])}"
        result.recommend(f"batch {k.value}: {k.extras['samples_per_s']:,.0f} samples/s, "
            f"{k.extras['samples_per_s'] / top.extras['samples_per_s']:.0%} of the best measured "
            f"({top.extras['samples_per_s']:,.0f} at batch {top.value}){mem}; larger batches may need a larger "
            "learning rate")
