"""Knobs with a short list of settings: intra-op threads, autocast, torch.compile, CUDA graphs."""

from __future__ import annotations

import torch

from trainspeed.errors import UsageError
from trainspeed.hardware.cpu import detect_cpu
from trainspeed.names import KNOB_SUMMARIES
from trainspeed.sweep.knobs.base import Knob, OnOffKnob, SweepContext, base_config, choice, positive_int
from trainspeed.sweep.result import SweepResult


def _fastest_calm(result: SweepResult, prefer: list[str]) -> str | None:
    """Among the best and its ties, the first value in `prefer` order (the cheapest to adopt)."""
    if result.best is None:
        return None
    calm = [result.best] + result.same_as_best
    return next((v for v in prefer if v in calm), result.best)


def _speed_line(result: SweepResult, value: str, other: str) -> str:
    p = {q.value: q for q in result.points if q.ok}
    if value not in p or other not in p:
        return ""
    return f"{p[other].median_s / p[value].median_s:.2f}x the speed of {other}"  # type: ignore[operator]


class Threads(Knob):
    name = "threads"
    summary = KNOB_SUMMARIES[name]

    def normalise(self, value: str, ctx: SweepContext) -> str:
        return str(positive_int(self.name, value))

    def defaults(self, ctx: SweepContext) -> list[str]:
        values, n = [], 1
        while n < ctx.logical_threads:
            values.append(n)
            n *= 2
        values.append(ctx.logical_threads)
        if ctx.physical_cores not in values:
            values.append(ctx.physical_cores)
        return [str(v) for v in sorted(set(values))]

    def config(self, value: str, ctx: SweepContext):  # noqa: ANN201
        return base_config(ctx, threads=int(value))

    def analyse(self, result: SweepResult, ctx: SweepContext) -> None:
        pick = _fastest_calm(result, sorted((p.value for p in result.points), key=int))
        if pick is None:
            return
        ties = "" if pick == result.best else f" (no measurable difference from the fastest, {result.best})"
        result.recommend(f"torch.set_num_threads({pick}){ties}: the fewest threads at the best speed leave " \
                                "cores for DataLoader workers")


class Amp(Knob):
    name = "amp"
    summary = KNOB_SUMMARIES[name]

    def normalise(self, value: str, ctx: SweepContext) -> str:
        return choice(self.name, value, {"fp32": "fp32", "off": "fp32", "none": "fp32", "bf16": "bf16",
                                         "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16"})

    def defaults(self, ctx: SweepContext) -> list[str]:
        if ctx.device == "cuda":
            return ["fp32", "bf16", "fp16"] if torch.cuda.is_bf16_supported() else ["fp32", "fp16"]
        return ["fp32", "bf16"]

    def config(self, value: str, ctx: SweepContext):  # noqa: ANN201
        return base_config(ctx, amp=None if value == "fp32" else value)

    def analyse(self, result: SweepResult, ctx: SweepContext) -> None:
        pick = _fastest_calm(result, ["fp32", "bf16", "fp16"])
        if pick is None:
            return
        if pick == "fp32":
            result.recommend("stay in fp32: autocast bought no measurable speed here" + (
                " (this CPU has no native bf16)" if ctx.device == "cpu" and not detect_cpu().native_bf16 else ""))
        else:
            result.recommend(f"autocast to {pick}: {_speed_line(result, pick, 'fp32')}; check the loss curve")


class Compile(OnOffKnob):
    name = "compile"
    summary = KNOB_SUMMARIES[name]

    def config(self, value: str, ctx: SweepContext):  # noqa: ANN201
        return base_config(ctx, compile=value == "on")

    def analyse(self, result: SweepResult, ctx: SweepContext) -> None:
        p = {q.value: q for q in result.points if q.ok}
        on = ctx.setups.get("on")
        if on is not None:
            # the first step compiles; a warmed step's time is what it would have cost without compiling
            compile_s = max(0.0, on["first_step_s"] - on["warmup_step_s"])
            result.findings["compile_s"] = compile_s
            if "on" in p and "off" in p:
                saving = (p["off"].median_s - p["on"].median_s) / ctx.steps  # type: ignore[operator]
                result.findings["saving_per_step_s"] = saving
                result.findings["break_even_steps"] = int(compile_s / saving) + 1 if saving > 0 else None
        if "on" not in p or "off" not in p:
            return
        even = result.findings.get("break_even_steps")
        if "on" == result.best and "off" not in result.same_as_best and even:
            result.recommend(f"compile for jobs longer than {even:,} steps: {_speed_line(result, 'on', 'off')} "
                                     f"per step, after {result.findings['compile_s']:.1f} s of compiling")
        else:
            result.recommend("stay eager: the compiled step was not measurably faster here")


class CudaGraphs(OnOffKnob):
    name = "cuda-graphs"
    summary = KNOB_SUMMARIES[name]
    needs_cuda = True

    def config(self, value: str, ctx: SweepContext):  # noqa: ANN201
        if ctx.device != "cuda":
            raise UsageError("cuda-graphs: the sweep's device is not CUDA")
        return base_config(ctx, cuda_graphs=value == "on")

    def analyse(self, result: SweepResult, ctx: SweepContext) -> None:
        pick = _fastest_calm(result, ["off", "on"])
        if pick == "on":
            result.recommend(f"capture the step as a CUDA graph (trainspeed.fit does): " \
                                    f"{_speed_line(result, 'on', 'off')}")
        elif pick == "off":
            result.recommend("no measurable gain from CUDA graphs: the GPU, not the launches, sets the pace")
