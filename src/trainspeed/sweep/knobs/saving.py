"""`checkpoint-save`: torch.save in the loop every N steps vs copying the state and saving it from
a background thread (one save in flight at a time), vs not saving."""

from __future__ import annotations

from trainspeed.names import KNOB_SUMMARIES
from trainspeed.sweep.knobs.base import Knob, SweepContext, base_config, choice
from trainspeed.sweep.result import SweepResult
from trainspeed.sweep.stats import overlap

MODES = {"none": "none", "off": "none", "sync": "sync", "thread": "thread", "background": "thread", "async": "thread"}


class CheckpointSave(Knob):
    name = "checkpoint-save"
    summary = KNOB_SUMMARIES[name]

    def normalise(self, value: str, ctx: SweepContext) -> str:
        return choice(self.name, value, MODES)

    def defaults(self, ctx: SweepContext) -> list[str]:
        return ["none", "sync", "thread"]

    def every(self, ctx: SweepContext) -> int:
        return ctx.save_every or max(1, ctx.steps // 5)

    def config(self, value: str, ctx: SweepContext):  # noqa: ANN201
        if value == "none":
            return base_config(ctx)
        return base_config(ctx, save_every=self.every(ctx), save_mode=value)

    def analyse(self, result: SweepResult, ctx: SweepContext) -> None:
        ok = {p.value: p for p in result.points if p.ok}
        result.findings["save_every"] = self.every(ctx)
        if "none" not in ok:
            return
        base = ok["none"].median_s
        for mode in ("sync", "thread"):
            p = ok.get(mode)
            if p is not None and p.extras.get("saves"):
                p.extras["ms_per_save"] = (p.median_s - base) / p.extras["saves"] * 1e3  # type: ignore[operator]
                p.extras["overhead_share"] = p.median_s / base - 1  # type: ignore[operator]
        if "sync" in ok and "thread" in ok and "overhead_share" in ok["sync"].extras:
            s, t = ok["sync"].extras, ok["thread"].extras
            result.recommend(f"saving every {self.every(ctx)} steps cost {s['overhead_share']:+.0%} of the run in the loop and "
                f"{t['overhead_share']:+.0%} from a background thread ({s['ms_per_save']:.1f} vs "
                f"{t['ms_per_save']:.1f} ms per save)"
                + ("; save from a background thread" if _clearly_faster(ok["thread"], ok["sync"])
                   else "; no measurable difference between the two ways of saving"))


def _clearly_faster(a, b) -> bool:  # noqa: ANN001
    return a.median_s < b.median_s and not overlap((a.ci_low, a.ci_high), (b.ci_low, b.ci_high))
