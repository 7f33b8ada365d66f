"""torch.compile compiling while the steps were measured (`compile_heavy`): a recompile is the whole cost of a compile
again, paid inside the training loop."""

from __future__ import annotations

from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.input import busiest_loader
from trainspeed.diagnose.rules.step_model import run_step_ms, speedup
from trainspeed.diagnose.verdict import Lever, Verdict
from trainspeed.watch.result import WatchResult

COMPILE_SHARE = 0.10
"""Compiles for a tenth of the measured run's time or more: a recompile for a new shape (the last batch of an epoch) can
be most of a short run's measured time (BENCHMARKS.md, "Where the code's constants come from")."""


def compile_heavy(r: WatchResult, c: Context) -> Verdict | None:
    if r.machine.compiles is None or not r.steps.measured:
        return None
    run_s = run_step_ms(r) * r.steps.measured / 1e3
    share = min(r.machine.compiles.seconds / run_s, 1.0) if run_s > 0 else 0.0
    if share < COMPILE_SHARE:
        return None
    graphs = f"{r.machine.compiles.count} graph{'s' if r.machine.compiles.count != 1 else ''}"
    evidence = (f"torch.compile compiled {graphs} while the steps were measured, after the first steps: "
                f"{r.machine.compiles.seconds:.2f} s of the measured run's {run_s:.2f} s ({share:.0%}; dynamo's compile times); "
                "each is a recompile, for an input of a shape the compiled code does not take (a smaller last batch, "
                "a new sequence length) or another guard that failed (predicted speed-up: the run without the compile "
                "time dynamo counted, a floor for inputs kept one shape: the first calls of new compiled code cost "
                "more)")
    action = ("keep the compiled code's inputs one shape: DataLoader(..., drop_last=True), or pad to a few fixed "
              "lengths; or compile shape-generic code once: torch.compile(model, dynamic=True) or "
              "torch._dynamo.mark_dynamic(x, 0) on the batch; TORCH_LOGS=recompiles prints why each one happened. "
              "A run of few steps may not repay compiling at all")
    return Verdict("compile_heavy", evidence, action, speedup(1.0, 1.0 - share), _drop_last(r),
                   title="torch.compile recompiling during training",
                   brief=f"{graphs} compiled while measured: {r.machine.compiles.seconds:.1f} s, {share:.0%} of the run",
                   fix="DataLoader(..., drop_last=True), or torch.compile(model, dynamic=True)")


def _drop_last(r: WatchResult) -> Lever | None:
    """The training loader's last, smaller batch of each epoch left out (a recipe change: fewer samples an epoch)."""
    loader = busiest_loader(r)
    if loader is None or not loader.batch_size:
        return None
    return Lever("dataloader", {"drop_last": True}, "DataLoader(..., drop_last=True)", same_arithmetic=False,
                 recipe="each epoch's last, smaller batch left out",
                 match={"dataset": loader.dataset, "batch_size": loader.batch_size})
