"""The run as the script made it: a watch result less the time its threads waited for a core.

On a machine shared with busy processes each phase's wall time holds waits for a core (`watch.run_queue`), and they
fall where the script happened to be: beside two busy processes on the 2-vCPU VM a step that saves a checkpoint had
its optimizer phase outgrow its save (2026-11-23). The verdicts about the script are judged on the phases less their
waits; the load verdict (`thread_oversubscription`) on the run as it was.
"""

from __future__ import annotations

from dataclasses import replace

from trainspeed.watch.result import WatchResult

JUDGED_APART = 0.05
"""The waits' share of the step from which the script's verdicts are judged without them."""


def waited_ms(r: WatchResult) -> float:
    """Milliseconds a step the phases waited for a core (0.0 where unread)."""
    return sum(p.wait_ms or 0.0 for p in r.phases.values())


def without_wait(r: WatchResult) -> WatchResult | None:
    """`r` with each phase's time less its wait for a core and the step's figures shrunk by the same part of the
    mean step; None where the waits are under JUDGED_APART of the step (or unread)."""
    step = r.mean_ms or r.median_ms
    waited = waited_ms(r)
    if not step or waited < JUDGED_APART * step:
        return None
    net = {name: max(0.0, p.share * step - (p.wait_ms or 0.0)) for name, p in r.phases.items()}
    left = max(sum(net.values()), 1e-9)  # a phase's wait is at most its time: the rest of the step is the script's
    keep = left / step
    phases = {name: replace(p, host_ms=max(0.0, p.host_ms - (p.wait_ms or 0.0)), share=net[name] / left, wait_ms=0.0)
              for name, p in r.phases.items()}

    def scaled(ms: float | None) -> float | None:
        return ms * keep if ms is not None else None

    return replace(r, phases=phases, median_ms=scaled(r.median_ms), p90_ms=scaled(r.p90_ms), mean_ms=scaled(r.mean_ms),
                   loop_s=r.loop_s * keep if r.loop_s is not None else None,
                   step_times_ms=[ms * keep for ms in r.step_times_ms])

