"""The run as the script made it: a watch result less the time its threads waited for a core, where other processes
held the cores (`diagnose.rules.registry.diagnose` judges the script's verdicts on it).

On a machine shared with busy processes each phase's wall time holds waits for a core (`load.waits`), and they
fall where the script happened to be: a step that saves a checkpoint can have its optimizer phase outgrow its save.
The verdicts about the script are judged on the phases less their waits; the load verdict (`thread_oversubscription`)
on the run as it was.
"""

from __future__ import annotations

from dataclasses import replace

from trainspeed.load.result import PhaseLoad
from trainspeed.watch.result import WatchResult

JUDGED_APART = 0.05
"""The waits' share of the step from which the script's verdicts are judged without them."""


def others_busy(r: WatchResult) -> bool:
    """Whether other processes kept `result.OTHERS_BUSY` cores busy over the run (the machine was shared)."""
    return r.load is not None and r.load.busy


def waited_ms(r: WatchResult) -> float:
    """Milliseconds a step the phases waited for a core (0.0 where unread)."""
    return sum(p.wait_ms or 0.0 for p in r.load.phases.values()) if r.load is not None else 0.0


def waits_share(r: WatchResult) -> float | None:
    """The phases' waits for a core, a share of the mean step (of the median where there is no mean); None without
    a step."""
    step = r.steps.mean_ms or r.steps.median_ms
    return waited_ms(r) / step if step else None


def without_wait(r: WatchResult) -> WatchResult | None:
    """`r` with each phase's time less the part of it that waited for a core (`PhaseLoad.wait_share`): its share of the
    mean step, its median, and the median step in the proportion its phases' medians kept (the other step figures in
    proportion), the process's CPU use over that shorter time; None where the waits are under JUDGED_APART of the step
    (or unread).

    The median step, not less what its phases' medians lost: beside busy processes a step's median holds more than the
    sum of its phases' medians, since each phase's time swings with its waits from step to step, and that excess waited
    as the phases did (BENCHMARKS.md, "Where the code's constants come from")."""
    share, step = waits_share(r), r.steps.mean_ms or r.steps.median_ms
    if share is None or share < JUDGED_APART or not step or r.load is None:
        return None
    load = r.load
    kept = {name: 1.0 - (load.phase(name).wait_share or 0.0) for name in r.phases}
    # medians with the median step's waited part: waits that come in bursts (a slice lost now and then) are the
    # mean's, and leave the median step as it was
    typical = {name: 1.0 - (w.median_wait_share if (w := load.phase(name)).median_wait_share is not None
                            else w.wait_share or 0.0)
               for name in r.phases}
    net = {name: p.share * step * kept[name] for name, p in r.phases.items()}
    left = max(sum(net.values()), 1e-9)
    phases = {name: replace(p, host_ms=p.host_ms * typical[name], share=net[name] / left)
              for name, p in r.phases.items()}
    median_ms = r.steps.median_ms
    if median_ms:  # the median step in the proportion of its phases' medians less their waits to them as measured
        measured, kept_ms = sum(p.host_ms for p in r.phases.values()), sum(p.host_ms for p in phases.values())
        median_ms = max(median_ms * kept_ms / measured if measured else median_ms, kept_ms, 1e-6)  # at least its phases
    ratio = median_ms / r.steps.median_ms if median_ms and r.steps.median_ms else left / step

    def scaled(ms: float | None) -> float | None:
        return ms * ratio if ms is not None else None

    s = r.steps
    # the process's CPU seconds are the same less the waits (a wait for a core is no CPU time), over less wall time:
    # the cores its step keeps busy as if they were its own (a loader's workers are judged beside that)
    cpu = r.process.cpu_percent * step / left if r.process.cpu_percent is not None else None
    waits = {name: PhaseLoad(0.0, 0.0, 0.0) for name in r.phases}
    return replace(r, phases=phases, load=replace(load, phases=waits), process=replace(r.process, cpu_percent=cpu),
                   steps=replace(s, median_ms=median_ms, p90_ms=scaled(s.p90_ms), mean_ms=left if s.mean_ms else None,
                                 loop_s=s.loop_s * left / step if s.loop_s is not None else None,
                                 times_ms=[ms * ratio for ms in s.times_ms]))
