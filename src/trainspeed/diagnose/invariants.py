"""Invariants every doctor report must keep: numbers a user can check against each other and find right.

`inconsistencies(report)` lists what does not add up; `diagnose.report.judge` runs it on every report it builds and
says so in the report's notes instead of passing an inconsistent number on silently. With the environment
variable TRAINSPEED_STRICT=1 (the test suite sets it) it raises instead, so that every report any test builds is
checked.
"""

from __future__ import annotations

import os

from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.registry import LOAD_RULES, script_view
from trainspeed.diagnose.rules.step_model import MAX_PREDICTED, steady_mean_ms
from trainspeed.diagnose.verdict import Verdict
from trainspeed.load.view import JUDGED_APART, others_busy, waits_share
from trainspeed.watch.result import WatchResult

SHARE_TOLERANCE = 0.005
"""Shares are computed in floating point from sums: they may miss 1 by rounding, not by more."""


CLAIMS_TIME = ("evaluation_heavy", "input_bound", "checkpoint_heavy", "thread_oversubscription")
"""Verdicts that each take a part of the run's time out (the evaluations, the data waits, the saves, the waits
for a core): each leaves the others' parts out of its own, so that their predictions can be combined, and the
parts together are less than the run."""


OP_RATE_MARGIN = 8.0
"""How far an op's FLOPs over its time may run above the matmul probe's rate before its time cannot be the op's: the
probe's 256 x 256 product keeps a many-core CPU's threads less busy than a large convolution does, and a probe read
while another process held a core for a moment reads low, so an op may beat it, though not eightfold. Beside busy
processes for the whole run (`load.view.others_busy`) the probe is no ceiling (a two-core CPU's 390 GFLOP/s read 22
beside two), and the ops' times are not checked against it."""
OP_RATE_DTYPES = ("float32", "float64")
"""The dtypes the probe's float32 rate bounds (bfloat16 and float16 may run several times faster on AMX)."""


class InconsistentReport(AssertionError):
    """Raised under TRAINSPEED_STRICT=1 when a report's numbers do not add up."""


def inconsistencies(w: WatchResult, verdicts: list[Verdict], c: Context | None = None) -> list[str]:
    """What in these measurements and verdicts does not add up (empty: all of it does); with the probes' readings
    `c`, the ops' times against the CPU's measured rate too."""
    found = _faster_than_the_cpu(w, c)
    shares = {p: s.share for p, s in w.phases.items()}
    if shares:
        total = sum(shares.values())
        if abs(total - 1.0) > SHARE_TOLERANCE and w.steps.measured:
            found.append(f"phase shares sum to {total:.4f}, not 1")
        found += [f"phase {p} has share {s:.4f}, outside 0..1" for p, s in shares.items()
                  if s < -SHARE_TOLERANCE or s > 1 + SHARE_TOLERANCE]
    if w.steps.measured > w.steps.seen:
        found.append(f"{w.steps.measured} steps measured of {w.steps.seen} seen")
    found += _loop_shorter_than_its_steps(w)
    if w.steps.median_ms is not None and w.steps.p90_ms is not None and w.steps.p90_ms < w.steps.median_ms:
        found.append(f"p90 step {w.steps.p90_ms:.3f} ms under the median {w.steps.median_ms:.3f} ms")
    ev = w.evaluation
    if ev is not None:
        if not 0 <= ev.share <= 1:
            found.append(f"evaluation takes {ev.share:.1%} of the run")
        elif ev.share >= 1 - SHARE_TOLERANCE and w.steps.measured:
            found.append(f"evaluation takes {ev.share:.1%} of a run whose steps trained")
        seen = ev.seen
        if ev.every_steps is not None and ev.every_steps * (seen - 1) > w.steps.seen:
            found.append(f"{seen} evaluations every {ev.every_steps:.0f} steps do not fit in {w.steps.seen} steps")
        if ev.in_run and ev.count > ev.in_run:
            found.append(f"{ev.count} evaluations measured of {ev.in_run} in the run")
    if w.loaders.start_share is not None and w.loaders.start_share > w.phases["data"].share + SHARE_TOLERANCE:
        found.append(f"DataLoader starts take {w.loaders.start_share:.1%} of the run, more than the data phase's "
                     f"{w.phases['data'].share:.1%}")
    if w.steps.syncs_per_step > 0 and not w.reads.sync_sites:
        found.append(f"{w.steps.syncs_per_step:.2f} syncs per step, and no place that made them")
    if w.steps.host_reads_per_step > 0 and not w.reads.host_read_sites:
        found.append(f"{w.steps.host_reads_per_step:.2f} reads of CPU tensors per step, and no place that made them")
    if w.model.device == "cpu" and w.steps.syncs_per_step > 0:
        found.append(f"{w.steps.syncs_per_step:.2f} syncs per step on a CPU run, where nothing waits for a device")
    steady = steady_mean_ms(w)
    waits = waits_share(w)
    rests_on_tail = waits is None or waits < JUDGED_APART  # else the verdict rests on the waits read, not the tail
    if steady is not None and w.steps.median_ms and steady[1] <= w.steps.median_ms and rests_on_tail:
        found += [f"{v.id} blames other processes for a tail the steps do not have (their own mean "
                  f"{steady[1]:.2f} ms, median {w.steps.median_ms:.2f} ms)"
                  for v in verdicts if v.id == "thread_oversubscription" and "other processes" in v.evidence]
    for v in verdicts:
        p = v.predicted_speedup
        if p is not None and not 1.0 <= p <= MAX_PREDICTED:
            found.append(f"{v.id} predicts {p:.2f}x, outside 1x..{MAX_PREDICTED:.0f}x")
    # the script's verdicts judged without the waits for a core claim parts of that shorter run
    net, step = script_view(w), w.steps.mean_ms or w.steps.median_ms
    scale = (net.steps.mean_ms or net.steps.median_ms or 0.0) / step if net is not None and step else 1.0
    load = {rule.__name__ for rule in LOAD_RULES}
    claims = {v.id: (1 - 1 / v.predicted_speedup) * (1.0 if v.id in load else scale) for v in verdicts
              if v.id in CLAIMS_TIME and v.predicted_speedup and v.predicted_speedup >= 1}
    if len(claims) > 1 and sum(claims.values()) >= 1 - SHARE_TOLERANCE:
        found.append("the time " + " and ".join(claims) + " predict to save (" +
                     " + ".join(f"{s:.0%}" for s in claims.values()) + ") is the whole run or more: one of them "
                     "counts time another claims")
    return found


def _loop_shorter_than_its_steps(w: WatchResult) -> list[str]:
    """The training loop's time against its steps: at least half the measured steps took the median step or longer,
    and all of them ran inside the loop, so the loop lasts half their count at the median at the least."""
    s = w.steps
    if s.loop_s is None or not s.median_ms or not s.measured:
        return []
    least = s.measured / 2 * s.median_ms / 1e3
    if s.loop_s >= least * (1 - SHARE_TOLERANCE):
        return []
    return [f"the training loop's {s.loop_s:.3f} s is shorter than half its {s.measured} measured steps at their "
            f"median {s.median_ms:.3f} ms ({least:.3f} s): one of the two figures is wrong"]


def _faster_than_the_cpu(w: WatchResult, c: Context | None) -> list[str]:
    """The CPU ops of the window whose time would have them run their FLOPs faster than this CPU can (`OP_RATE_MARGIN`
    times the matmul probe's rate): a time that is not the op's (the ops' list would print it as if it were)."""
    if c is None or not c.matmul_gflops or w.model.device != "cpu" or not w.window.op_times or others_busy(w):
        return []
    found = []
    for op in w.window.op_times:
        if not op.flops or op.ms <= 0 or op.dtype not in OP_RATE_DTYPES:
            continue
        rate = op.flops / op.ms * 1e-6  # GFLOP/s
        if rate > OP_RATE_MARGIN * c.matmul_gflops:
            found.append(f"{op.op} ({op.dtype}) would run {op.flops / 1e9:.2f} GFLOP a step in {op.ms:.3f} ms, "
                         f"{rate:.0f} GFLOP/s against this CPU's measured {c.matmul_gflops:.0f}: that time is not the "
                         "op's")
    return found


def checked(w: WatchResult, verdicts: list[Verdict], c: Context | None = None) -> list[str]:
    """`inconsistencies` as notes for the report; under TRAINSPEED_STRICT=1, InconsistentReport instead."""
    found = inconsistencies(w, verdicts, c)
    if found and os.environ.get("TRAINSPEED_STRICT") == "1":
        raise InconsistentReport("; ".join(found))
    return [f"trainspeed's own numbers do not add up here, read them with care: {what}" for what in found]
