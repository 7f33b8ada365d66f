"""`device` (CPU vs CUDA) and `crossover` (a grid of model width x batch: where the GPU starts to
win). Without CUDA the GPU side comes from the step-time model (sweep.gpu_model), labelled predicted."""

from __future__ import annotations

from typing import Any

from trainspeed.errors import UsageError
from trainspeed.names import KNOB_SUMMARIES
from trainspeed.probe import cpu_dispatch_us
from trainspeed.sweep.arm import ArmConfig
from trainspeed.sweep.gpu_model import GpuModel, reference_gpu
from trainspeed.sweep.knobs.base import Knob, SweepContext, choice, positive_int
from trainspeed.sweep.result import SweepPoint, SweepResult
from trainspeed.sweep.runner import ArmSpec
from trainspeed.workloads.catalog import BUILTINS, builtin_workload


def _predicted_point(value: str, setup: dict[str, Any], model: GpuModel, steps: int) -> SweepPoint | None:
    ops, flops = setup.get("ops_per_step"), setup.get("flops_per_step")
    if not ops:
        return None
    step = model.step_s(ops, flops or 0)
    return SweepPoint(value, step * steps, None, None, True, trials=0, predicted=True,
                      extras={"step_ms": step * 1e3, "ops_per_step": ops, "flops_per_step": flops})


def gpu_model(ctx: SweepContext) -> GpuModel:
    return reference_gpu(ctx.gpu, cpu_dispatch_us())


class Device(Knob):
    name = "device"
    summary = KNOB_SUMMARIES[name]
    predicts_gpu = True

    def normalise(self, value: str, ctx: SweepContext) -> str:
        return choice(self.name, value, {"cpu": "cpu", "cuda": "cuda", "gpu": "cuda"})

    def defaults(self, ctx: SweepContext) -> list[str]:
        return ["cpu", "cuda"]

    def arms(self, values: list[str], ctx: SweepContext) -> list[ArmSpec]:
        return [ArmSpec(v, ctx.workload, ArmConfig(device=v, count_ops=v == "cpu"))
                for v in values if v == "cpu" or ctx.cuda]

    def analyse(self, result: SweepResult, ctx: SweepContext) -> None:
        for p in result.points:
            if p.ok:
                p.extras["step_ms"] = p.median_s / ctx.steps * 1e3  # type: ignore[operator]
        model = None
        if not ctx.cuda and "cuda" in ctx.values and "cpu" in ctx.setups:
            model = gpu_model(ctx)
            point = _predicted_point("cuda", ctx.setups["cpu"], model, ctx.steps)
            if point is not None:
                result.points.append(point)
                result.notes.append("no CUDA here: the cuda point is " + model.describe())
        by = {q.value: q for q in result.points if q.ok}
        if "cpu" in by and "cuda" in by:
            fast, slow = sorted(("cpu", "cuda"), key=lambda v: by[v].seconds)
            label = f" ({model.label()})" if by["cuda"].predicted and model is not None else ""
            name = {"cpu": "the CPU", "cuda": "the GPU"}
            result.recommend(f"train on {name[fast]}{label}: {by[slow].seconds / by[fast].seconds:.2f}x "
                                     f"the speed of {name[slow]} for this workload")


class Crossover(Knob):
    name = "crossover"
    summary = KNOB_SUMMARIES[name]
    predicts_gpu = True
    ranks = False

    def _check(self, ctx: SweepContext) -> None:
        spec = BUILTINS.get(ctx.workload.name)
        if spec is None or "width" not in spec.defaults or "batch" not in spec.defaults:
            sized = [n for n, b in BUILTINS.items() if "width" in b.defaults]
            raise UsageError(f"crossover varies model width and batch: use a sized built-in workload "
                             f"({', '.join(sized)}), not {ctx.spec!r}")

    def normalise(self, value: str, ctx: SweepContext) -> str:
        self._check(ctx)
        return str(positive_int(self.name, value, "a positive model width"))

    def defaults(self, ctx: SweepContext) -> list[str]:
        self._check(ctx)
        return ["16", "64", "256", "1024"]

    def devices(self, ctx: SweepContext) -> list[str]:
        return ["cpu", "cuda"] if ctx.cuda else ["cpu"]

    def arms(self, values: list[str], ctx: SweepContext) -> list[ArmSpec]:
        base = {k: v for k, v in ctx.workload.params.items() if k not in ("width", "batch")}
        return [ArmSpec(cell(w, b, dev), builtin_workload(ctx.workload.name, **base, width=int(w), batch=b),
                        ArmConfig(device=dev, count_ops=dev == "cpu"))
                for w in values for b in ctx.batches for dev in self.devices(ctx)]

    def analyse(self, result: SweepResult, ctx: SweepContext) -> None:
        widths = sorted(int(v) for v in ctx.values)
        measured_gpu = ctx.cuda
        model = None if measured_gpu else gpu_model(ctx)
        if model is not None:
            for w in widths:
                for b in ctx.batches:
                    setup = ctx.setups.get(cell(w, b, "cpu"))
                    point = setup and _predicted_point(cell(w, b, "cuda"), setup, model, ctx.steps)
                    if point:
                        result.points.append(point)
            result.notes.append("no CUDA here: every cuda cell is " + model.describe())
        by = {p.value: p for p in result.points if p.ok}

        def step_ms(w: int, b: int, dev: str) -> float | None:
            p = by.get(cell(w, b, dev))
            return None if p is None else p.seconds / ctx.steps * 1e3

        cpu_ms = [[step_ms(w, b, "cpu") for b in ctx.batches] for w in widths]
        cuda_ms = [[step_ms(w, b, "cuda") for b in ctx.batches] for w in widths]
        grid = {"widths": widths, "batches": list(ctx.batches), "cpu_ms": cpu_ms, "cuda_ms": cuda_ms,
                "cuda_predicted": not measured_gpu, "gpu": ctx.gpu if not measured_gpu else "measured"}
        result.findings["grid"] = grid
        wins = [(w, b) for i, w in enumerate(widths) for j, b in enumerate(ctx.batches)
                if _faster(cuda_ms[i][j], cpu_ms[i][j])]
        label = f" ({model.label()})" if model is not None else ""
        if not wins:
            result.recommend(f"the CPU wins in every cell measured{label}: for models this size, train on the CPU")
        else:
            cells = [(w, b) for i, w in enumerate(widths) for j, b in enumerate(ctx.batches)
                     if cpu_ms[i][j] and cuda_ms[i][j]]
            losses = [c for c in cells if c not in wins]
            smallest = min(wins, key=lambda wb: wb[0] * wb[0] * wb[1])
            where = ("; the CPU is faster at " + ", ".join(f"{w}x{b}" for w, b in losses)) if losses else \
                " and in every larger cell measured"
            result.recommend(f"the GPU{label} wins from width {smallest[0]} x batch {smallest[1]}{where} "
                                     "(cells are width x batch)")


def cell(w: int | str, b: int, device: str) -> str:
    return f"w={w},b={b},{device}"


def _faster(a: float | None, b: float | None) -> bool:
    """Whether `a` was measured (or predicted) and is under `b`, measured too."""
    return bool(a and b and a < b)
