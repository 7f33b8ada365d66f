"""Random masks drawn on a CPU (`dropout_heavy`): dropout's cost there is its random numbers, one per element."""

from __future__ import annotations

from trainspeed.diagnose.rules.brief import of_step
from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.step_model import step_speedup, window_scale
from trainspeed.diagnose.verdict import Verdict
from trainspeed.watch.result import WatchResult

MASK_OPS = ("aten.bernoulli_", "aten.bernoulli")
"""The ops that draw a random mask: dropout's (`nn.Dropout`, the dropout of `nn.TransformerEncoderLayer` and
`nn.MultiheadAttention`, which reach the profiler window's op table as `aten.bernoulli_` on a CPU) and
torch.bernoulli's. `aten.native_dropout` counts only where no draw is in the table (a build that runs it as one
op): where both are, the draw is inside it."""
MASK_SHARE = 0.10
"""Masks drawn for a tenth of the step or more. A CPU draws a mask at one random number per element (torch.compile's
generated code no faster), a GPU the same in microseconds (BENCHMARKS.md, "Where the code's constants come from")."""


def dropout_heavy(r: WatchResult, c: Context) -> Verdict | None:
    if r.model.device != "cpu" or not r.window.op_times or not r.steps.median_ms:
        return None
    rows = [row for row in r.window.op_times if row.op in MASK_OPS] or \
        [row for row in r.window.op_times if row.op == "aten.native_dropout"]
    ms = sum(row.ms for row in rows) * window_scale(r)
    step = r.steps.median_ms
    if ms < MASK_SHARE * step:
        return None
    calls = sum(row.calls for row in rows)
    names = ", ".join(f"{row.op} x{row.calls:.0f}" for row in rows)
    evidence = (f"random masks take {ms:.2f} ms of the {step:.2f} ms step ({ms / step:.0%}; {names} per step, in the "
                f"profiler window): dropout draws one random number per element of every activation it masks "
                f"({calls:.0f} masks per step), and a CPU draws them at a few nanoseconds each (predicted speed-up: "
                "the step without the draws, a floor for dropout=0, which also drops the masks' multiplications and "
                "lets attention run a fused kernel)")
    action = ("a cost of the training recipe, not of the code: a CPU draws random numbers no faster compiled; where "
              "the model does not need that regularisation, fewer dropout layers or dropout=0 (nn.Dropout(p=0.0), "
              "nn.TransformerEncoderLayer(..., dropout=0.0)) removes it; compare the validation loss, since dropout "
              "regularises; on a GPU the same masks cost little")
    return Verdict("dropout_heavy", evidence, action, step_speedup(r, step, step - ms),
                   title="Dropout's random masks, slow on a CPU",
                   brief=f"{calls:.0f} random masks a step take {of_step(ms, step)}",
                   fix="nn.Dropout(p=0.0) where the model needs no dropout (compare the validation loss)")
