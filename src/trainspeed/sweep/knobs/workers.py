"""`num-workers`: DataLoader worker processes, with pin_memory and persistent workers as options.

A value is a worker count, optionally with `+pin` (pin_memory=True, CUDA only) and/or
`+persistent` (persistent_workers=True): `0`, `4`, `4+pin`, `4+persistent`, `4+pin+persistent`.
"""

from __future__ import annotations

from torch.utils.data import Dataset

from trainspeed.errors import UsageError
from trainspeed.names import KNOB_SUMMARIES
from trainspeed.sweep.knobs.base import Knob, SweepContext, base_config
from trainspeed.sweep.result import SweepResult
from trainspeed.sweep.stats import knee


def _parts(value: str) -> tuple[int, bool, bool]:
    head, *flags = value.split("+")
    return int(head), "pin" in flags, "persistent" in flags


class NumWorkers(Knob):
    name = "num-workers"
    summary = KNOB_SUMMARIES[name]

    def normalise(self, value: str, ctx: SweepContext) -> str:
        head, *flags = value.lower().split("+")
        try:
            n = int(head)
        except ValueError:
            n = -1
        if n < 0 or any(f not in ("pin", "persistent") for f in flags):
            raise UsageError(f"{self.name}: expected a worker count like 4, 4+pin or 4+persistent, got {value!r}")
        if "pin" in flags and not ctx.cuda:
            raise UsageError(f"{self.name}: {value!r}: pin_memory only helps copies to a CUDA device, and there "
                             "is none here")
        if "persistent" in flags and n == 0:
            raise UsageError(f"{self.name}: {value!r}: persistent workers need at least one worker")
        return "+".join([str(n)] + [f for f in ("pin", "persistent") if f in flags])

    def defaults(self, ctx: SweepContext) -> list[str]:
        values = [str(n) for n in range(0, 2 * ctx.physical_cores + 1)]
        values.append(f"{ctx.physical_cores}+persistent")
        if ctx.cuda:
            values += [f"{ctx.physical_cores}+pin", f"{ctx.physical_cores}+pin+persistent"]
        return values

    def config(self, value: str, ctx: SweepContext):  # noqa: ANN201
        n, pin, persistent = _parts(value)
        return base_config(ctx, loader=True, num_workers=n, pin_memory=pin, persistent_workers=persistent)

    def analyse(self, result: SweepResult, ctx: SweepContext) -> None:
        if not isinstance(ctx.data(), Dataset):
            result.notes.append(f"{ctx.workload.name} keeps its data as tensors: workers only slice them, so this "
                                "measures their overhead; digits-aug (or your own Dataset) does per-item work")
        plain = sorted((p for p in result.points if p.ok and "+" not in p.value), key=lambda p: int(p.value))
        for p in result.points:
            if p.ok:
                p.extras["step_ms"] = p.median_s / ctx.steps * 1e3  # type: ignore[operator]
        if not plain:
            return
        i = knee([1 / p.median_s for p in plain])  # type: ignore[operator]
        if i is None:
            return
        k = plain[i]
        result.findings["knee"] = k.value
        fastest = min((p for p in result.points if p.ok), key=lambda p: p.median_s)  # type: ignore[arg-type,return-value]
        base = next((p for p in plain if p.value == "0"), None)
        gain = f", {base.median_s / k.median_s:.2f}x the speed of num_workers=0" if base and k is not base else ""  # type: ignore[operator]
        advice = f"num_workers={k.value}: within 10% of the fastest setting measured ({fastest.value}){gain}"
        if fastest.value != k.value and fastest.value not in result.same_as_best and "+" in fastest.value:
            advice += f"; {fastest.value} was faster still"
        more = [p for p in plain[i + 1:]]
        if more:
            advice += f"; more workers ({', '.join(p.value for p in more)}) were not 10% faster"
        result.recommend(advice)
