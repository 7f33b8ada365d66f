"""`record-every`: read the loss to the host every N steps. Fits seconds = a + b x records."""

from __future__ import annotations

from trainspeed.names import KNOB_SUMMARIES
from trainspeed.sweep.knobs.base import Knob, SweepContext, base_config, positive_int
from trainspeed.sweep.result import SweepResult
from trainspeed.sweep.stats import line_fit, overlap

LINEAR_R2 = 0.95
"""Above this R^2 the line explains the times; below it the cost of a record depends on where."""


def every(value: str) -> str:
    return "every step" if value == "1" else f"every {value} steps"


def records(value: str, steps: int) -> int:
    return 0 if value == "never" else steps // int(value)


class RecordEvery(Knob):
    name = "record-every"
    summary = KNOB_SUMMARIES[name]

    def normalise(self, value: str, ctx: SweepContext) -> str:
        if value.lower() == "never":
            return "never"
        return str(positive_int(self.name, value, "a positive integer or 'never'"))

    def defaults(self, ctx: SweepContext) -> list[str]:
        return [str(v) for v in (1, 2, 5, 10, 20, 50, 100, 200, 1000) if v <= ctx.steps] + ["never"]

    def config(self, value: str, ctx: SweepContext):  # noqa: ANN201
        return base_config(ctx, record_every=None if value == "never" else int(value))

    def analyse(self, result: SweepResult, ctx: SweepContext) -> None:
        ok = [p for p in result.points if p.ok and p.median_s is not None]
        for p in ok:
            p.extras["records"] = records(p.value, ctx.steps)
            if p.extras.get("reads"):
                p.extras["read_us"] = p.extras["read_s"] / p.extras["reads"] * 1e6
        if len({p.extras["records"] for p in ok}) < 2:
            result.notes.append("a line needs at least two different record counts")
            return
        fit = line_fit([p.extras["records"] for p in ok], [p.seconds for p in ok])
        result.findings["fit"] = {"a": fit.a, "b": fit.b, "r2": fit.r2}
        base = min(ok, key=lambda p: p.extras["records"])
        for p in ok:
            p.extras["predicted_s"] = fit(p.extras["records"])
            extra = p.extras["records"] - base.extras["records"]
            if extra > 0 and p.seconds > base.seconds and not overlap(p.interval, base.interval):
                # only where the slowdown is measurable: inside the noise a cost per record means nothing
                p.extras["cost_per_record_us"] = (p.seconds - base.seconds) / extra * 1e6
        result.findings["linear"] = fit.r2 >= LINEAR_R2
        result.findings["why"] = self._why(ok, fit.r2, ctx.device)
        result.recommend(self._advice(result, ok))

    @staticmethod
    def _why(ok: list, r2: float, device: str) -> str:
        base = min(ok, key=lambda p: p.extras["records"])
        parts = [f"seconds = a + b x records fits with R^2 = {r2:.3f}"]
        slower = [p for p in ok if "cost_per_record_us" in p.extras]
        if not slower:
            parts.append(f"no interval was measurably slower than {base.value} (every difference is inside the "
                         "95% intervals), so the line's slope is noise, not a cost")
        else:
            costs = sorted(slower, key=lambda p: p.extras["cost_per_record_us"])
            lo, hi = costs[0], costs[-1]
            parts.append("measurably slower than " + base.value + ": " + ", ".join(
                f"every {p.value} (+{(p.median_s / base.median_s - 1):.1%}, {p.extras['cost_per_record_us']:.1f} us "
                "per record)" for p in costs))
            if r2 < LINEAR_R2 and hi.extras["cost_per_record_us"] > 2 * lo.extras["cost_per_record_us"]:
                parts.append(f"not linear: a record cost {hi.extras['cost_per_record_us'] / lo.extras['cost_per_record_us']:.1f}x "
                             f"more at every {hi.value} than at every {lo.value}")
        reads = [p for p in ok if "read_us" in p.extras]
        if reads:
            lo = min(reads, key=lambda p: p.extras["read_us"])
            hi = max(reads, key=lambda p: p.extras["read_us"])
            parts.append(f"one read took {lo.extras['read_us']:.1f} us of host time when made every {lo.value} "
                         f"steps and {hi.extras['read_us']:.1f} us every {hi.value} steps")
            if device == "cuda":
                parts.append("on a GPU a read waits for all the work still queued before it, so what it costs "
                             "depends on how much work precedes it, not only on how many reads there are")
            else:
                parts.append("on a CPU nothing is queued: a read only copies one value, so a cost per record "
                             "above the read's own host time is spent around the read, not waiting for a device")
        return "; ".join(parts)

    @staticmethod
    def _advice(result: SweepResult, ok: list) -> str:
        if result.best is None:
            return ""
        best = next(p for p in ok if p.value == result.best)
        calm = [p for p in ok if p.value in result.same_as_best or p is best]
        frequent = max(calm, key=lambda p: p.extras["records"])
        if frequent.extras["records"] == 0:
            return "never read the loss in the loop: every recording interval measured was slower than none"
        if frequent is best:
            return (f"record {every(frequent.value)}: no interval measured was measurably faster "
                    f"({frequent.extras['records']} records per {result.steps} steps)")
        return (f"record {every(frequent.value)}: no measurable difference from the fastest "
                f"({best.value}), with {frequent.extras['records']} records per {result.steps} steps")
