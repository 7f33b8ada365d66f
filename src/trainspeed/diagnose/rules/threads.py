"""Thread verdicts: more threads than cores, or a shared machine (`thread_oversubscription`), and fewer threads
than the matrix work could use (`threads_unused`).
"""

from __future__ import annotations

import math

from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.step_model import (
    COMPUTE,
    compute_ms,
    op_work,
    run_step_ms,
    speedup,
    steady_mean_ms,
    window_scale,
    workers_cores,
)
from trainspeed.diagnose.verdict import Lever, Verdict
from trainspeed.load.result import OTHERS_BUSY
from trainspeed.load.view import JUDGED_APART, others_busy, waited_ms, waits_share
from trainspeed.watch.result import WatchResult

TURNS_SHARE = 0.6
"""The share of the samples with two of the run's threads runnable that had two of them on one CPU from which the load
verdict says they took turns on one core (`core_sharing`): far above it beside busy processes of the run's own
scheduling group, far below beside processes apart and alone (BENCHMARKS.md, "Where the code's constants come from")."""
WORKERS_IDLE = 0.25
"""DataLoader workers that kept under this many cores busy in all (measured) leave torch's threads their cores: an
in-memory dataset's two workers kept 0.07 busy beside a GAN's 152 ms step, and one intra-op thread ran that script 0.70x
as fast (BENCHMARKS.md, "Where the code's constants come from")."""
THREADS_GAIN = 1.10  # threads_unused: more threads advised only where predicted to make the run this much faster
TAIL_GAIN = 0.05
"""A shared machine's verdict from the steps' own tail (no waits read) only where that tail, less what other verdicts
claim of it, is this share of the steps' own mean (the mean step less those claims): a tail the data waits explain
leaves nothing for fewer threads to recover (a TensorDataset loader's run beside bursty load was once predicted "the
mean step falling by 0.00 ms")."""


def _cores(physical_cores: int, usable: int | None) -> int:
    """The cores this process's threads can have: the machine's, or fewer where its affinity or a cgroup quota
    (a container's --cpus, a taskset) holds it to fewer CPUs."""
    return min(physical_cores, usable or physical_cores)


def threads_candidate(r: WatchResult, physical_cores: int, usable: int | None = None) -> int | None:
    """The intra-op threads to advise where the run gave torch more threads than cores, or fewer, and had no
    DataLoader workers (then torch's threads alone use the cores, and a matmul at each count tells what the
    advice buys; with workers, fewer threads may leave them their cores) and, for fewer, no other process kept
    cores busy and the process may use more CPUs (`usable`: hardware.cpu.usable_cores); None otherwise."""
    if r.model.device != "cpu" or any(ld.num_workers for ld in r.loaders.each):
        return None
    target = max(1, _cores(physical_cores, usable))
    if r.process.torch_threads > target or (r.process.torch_threads < target and not others_busy(r)):
        return target
    return None


def matmul_side(r: WatchResult) -> int:
    """The side of a square matmul as big as the run's dearest matrix op's average call (from the profiler
    window's FLOPs), for probes that should multiply matrices of the run's size; 256 without one."""
    rows = [row for row in r.window.op_times or [] if row.arithmetic and row.flops and row.calls]
    if not rows:
        return 256
    row = max(rows, key=lambda row: row.ms)
    return int(min(2048, max(64, round(((row.flops or 0.0) / row.calls / 2) ** (1 / 3)))))


def thread_oversubscription(r: WatchResult, c: Context) -> Verdict | None:
    # the busiest loader's workers: a training and a validation loader take turns (an idle worker waits unscheduled);
    # where their CPU time was measured, the cores they kept busy (workers that hand over cheap batches sleep)
    workers = max((ld.num_workers for ld in r.loaders.each), default=0)
    held = workers_cores(r) if workers else None
    busy_threads = r.process.torch_threads + (workers if held is None else held if held >= WORKERS_IDLE else 0)
    cores = _cores(c.physical_cores, c.usable_cores)
    if r.process.torch_threads > cores or busy_threads > min(c.logical_threads, c.usable_cores or c.logical_threads):
        quota = (f" ({c.usable_cores} of them this process may use: its affinity or cgroup quota)"
                 if cores < c.physical_cores else "")
        kept = f" (they kept {held:.2f} cores busy, measured)" if held is not None else ""
        several = sum(1 for ld in r.loaders.each if ld.num_workers) > 1
        evidence = (f"torch uses {r.process.torch_threads} intra-op threads beside {workers} DataLoader worker process"
                    f"{'es' if workers != 1 else ''}{' (the most any of its loaders has: they take turns)' if several else ''}"
                    f"{kept} on {c.physical_cores} cores / {c.logical_threads} hardware threads{quota}")
        evidence += _waited(r, judged=others_busy(r)) or ""
        keep = max(1, cores - workers)
        action = _set_threads(keep, "")
        advised = threads_candidate(r, c.physical_cores, c.usable_cores) == keep  # what the probes measured
        beside = f" and {workers} DataLoader worker{'s' if workers != 1 else ''}" if workers else ""
        words = ("Too many threads for this machine",
                 f"torch runs {r.process.torch_threads} threads{beside} on {cores} cores")
        if advised and others_busy(r) and c.thread_step_ms is not None:
            return _busy_probed(r, c, keep, evidence, action, words)  # its mean steps measured beside the same processes
        predicted = None
        unpredicted = f"not measured at {keep} thread{'s' if keep > 1 else ''} (`trainspeed doctor --try` times it)"
        probed = c.thread_step_ms is not None or c.thread_gflops is not None
        if probed and advised:
            more, gain = _thread_gain(r, c, keep)
            evidence += more
            predicted = gain
            unpredicted = f"measured no faster at {keep} thread{'s' if keep > 1 else ''} on this machine"
        return Verdict("thread_oversubscription", evidence, action, predicted, threads_lever(keep), title=words[0],
                       brief=words[1], fix=f"torch.set_num_threads({keep})",
                       unpredicted=unpredicted if predicted is None else None)
    return _machine_busy(r, c, workers)


def _thread_gain(r: WatchResult, c: Context, keep: int, tail: bool = True) -> tuple[str, float | None]:
    """What `keep` threads buy. With more threads than cores (`tail`) and the step probe (`Context.thread_step_ms`):
    forward, backward and the optimizer of the median step speed up by the probe's ratio (a training step of the
    run's matrix size at both counts: every parallel op of a step waits for its threads to get a core, which a matmul
    repeated back to back hides), and the run's tail goes, so the mean step falls to the median less that saving.
    Otherwise, from `Context.thread_gflops`: the window's matrix ops and the other ops' work beyond their fixed cost
    speed up by the matmul's ratio, the mean step less that saving."""
    if tail and c.thread_step_ms is not None:
        now, fixed = c.thread_step_ms
        text = (f"; a training step of the run's matrix size ({matmul_side(r)} wide) took {now:.2f} ms with "
                f"{r.process.torch_threads} threads and {fixed:.2f} with {keep} (measured in turn after the run)")
        if fixed >= now or not r.steps.median_ms:
            return text, None
        work = compute_ms(r)
        saved = work * (1 - fixed / now)
        text += (f" (predicted speed-up: forward, backward and the optimizer, {work:.2f} ms of the median step, at "
                 "that ratio")
        bound = ("; a floor: each parallel op waits for its threads to get a core, and a step with more small ops "
                 "than the probe's loses more")
    else:
        assert c.thread_gflops is not None
        now, fixed = c.thread_gflops
        text = (f"; a matmul of the run's size ran at {now:.0f} GFLOP/s with {r.process.torch_threads} "
                f"thread{'s' if r.process.torch_threads > 1 else ''} and {fixed:.0f} with {keep} (measured in turn after the "
                "run)")
        if fixed <= now or not r.steps.median_ms or not r.window.op_times:
            return text, None
        parallel = sum(row.ms for row in r.window.op_times if row.arithmetic) * window_scale(r) + op_work(r, c)[0]
        saved = parallel * (1 - now / fixed)
        text += f" (predicted speed-up: {parallel:.2f} ms of matrix and other heavy ops per step at that ratio"
        bound = ""
    steady = steady_mean_ms(r)
    if tail and steady is not None and steady[1] > r.steps.median_ms:
        mean, own, parts = steady
        text += f", and the mean step's own tail, {own - r.steps.median_ms:.2f} ms{_less(parts)}, gone{bound})"
        return text, speedup(mean, mean - (own - r.steps.median_ms) - saved)
    return text + bound + ")", speedup(run_step_ms(r), run_step_ms(r) - saved)


def threads_unused(r: WatchResult, c: Context) -> Verdict | None:
    """torch given fewer intra-op threads than the machine has cores (torch.set_num_threads(1), OMP_NUM_THREADS=1
    set by a launcher or a library) on a step whose matrix ops would run faster on all of them: measured, a
    matmul of the run's size at both counts (`Context.thread_gflops`). Not where DataLoader workers or other
    processes use the cores (`threads_candidate`)."""
    keep = threads_candidate(r, c.physical_cores, c.usable_cores)
    if keep is None or r.process.torch_threads >= keep or c.thread_gflops is None:
        return None
    more, gain = _thread_gain(r, c, keep, tail=False)
    if gain is None or gain < THREADS_GAIN:
        return None
    evidence = (f"torch uses {r.process.torch_threads} intra-op thread{'s' if r.process.torch_threads > 1 else ''} on "
                f"{c.physical_cores} cores" + more)
    action = (f"torch.set_num_threads({keep}) (or OMP_NUM_THREADS={keep}; a launcher or a library may have set it "
              "lower); `trainspeed sweep threads -- <your script>` measures the best value")
    t = r.process.torch_threads
    assert c.thread_gflops is not None
    now, fixed = c.thread_gflops
    return Verdict("threads_unused", evidence, action, gain, threads_lever(keep),
                   title="Cores left idle: fewer threads than cores",
                   brief=f"torch runs {t} thread{'s' if t > 1 else ''} on {c.physical_cores} cores; a matmul ran "
                         f"{fixed / now:.1f}x as fast on {keep} (measured)" if now > 0 else
                         f"torch runs {t} thread{'s' if t > 1 else ''} on {c.physical_cores} cores",
                   fix=f"torch.set_num_threads({keep})")


def threads_lever(keep: int) -> Lever:
    """torch's intra-op threads set to `keep` (a matmul's sums then run in another order: not the same arithmetic)."""
    return Lever("threads", {"threads": keep}, f"torch.set_num_threads({keep})", same_arithmetic=False)


def _set_threads(keep: int, when: str) -> str:
    return (f"torch.set_num_threads({keep}) (or OMP_NUM_THREADS={keep}){when}; `trainspeed sweep threads -- <your script>` measures "
            "the best value")


def busy_keep(r: WatchResult, logical_threads: int) -> int | None:
    """The intra-op threads to advise where other processes held the cores torch's threads count on: the hardware
    threads they left, less the busiest loader's DataLoader workers, at least one; None where the machine was not
    shared, or every thread had room, or that is no fewer than the run's."""
    others = r.load.others_cpu_cores if r.load is not None else None
    workers = max((ld.num_workers for ld in r.loaders.each), default=0)
    if others is None or others < OTHERS_BUSY or r.process.torch_threads < 2 or \
            r.process.torch_threads + workers + others <= logical_threads:
        return None
    keep = max(1, math.floor(logical_threads - others - workers))
    return keep if keep < r.process.torch_threads else None


def _machine_busy(r: WatchResult, c: Context, workers: int) -> Verdict | None:
    """Other processes held the cores torch's threads count on (`load.marks`): an intra-op parallel region
    then waits a scheduler slice for its thread that lost its core, now and then, so the run's mean step
    outgrows its median. With the step probe at the advised count under the same load (`Context.thread_step_ms`),
    the prediction is that probe's."""
    keep = busy_keep(r, c.logical_threads)
    if keep is None:
        return None
    others = (r.load.others_cpu_cores if r.load is not None else None) or 0.0
    words = ("Other processes share this machine's cores",
             f"other processes kept {others:.1f} of {c.logical_threads} CPUs busy; torch runs "
             f"{r.process.torch_threads} threads")
    evidence = (f"other processes kept {others:.1f} of this machine's {c.logical_threads} hardware threads busy while "
                f"the steps were measured, beside torch's {r.process.torch_threads} intra-op threads and {workers} DataLoader "
                f"workers: a parallel op waits for each of its threads to get a core")
    action = _set_threads(keep, " while the machine is shared, or stop the other processes")
    waited = _waited(r, judged=True)  # other processes are busy here
    # the steps' own tail: the mean step (the clock's exact sums) less what other verdicts claim of it
    steady = steady_mean_ms(r)
    median = r.steps.median_ms or 0.0
    tail = steady if steady is not None and median and steady[1] - median >= TAIL_GAIN * steady[1] else None
    probe = c.thread_step_ms
    if tail is None and not waited and (probe is None or probe[1] >= probe[0]):
        return None  # no tail of the steps' own, no wait read, no faster step measured: nothing says it waited
    if tail is not None:
        mean, own, parts = tail
        evidence += (f"; the mean step is {mean:.2f} ms against a median of {median:.2f} ms (p90 "
                     f"{r.steps.p90_ms or 0.0:.2f} ms){_less(parts, own)}")
    if probe is not None:  # measured at the advised count beside the same processes
        return _busy_probed(r, c, keep, evidence + (waited or ""), action, words)
    if waited:  # the waits were read: they, not the tail, are what the other processes cost
        step, wait = r.steps.mean_ms or median, waited_ms(r)
        evidence += (f"{waited} (predicted speed-up: the step without that wait, as if the cores were the run's "
                     "own; fewer threads recover part of it)")
        return Verdict("thread_oversubscription", evidence, action, speedup(step, step - wait), threads_lever(keep),
                       title=words[0], brief=words[1], fix=f"torch.set_num_threads({keep})")
    # every step as fast as the median one, the steps' own tail being waits for a core; not a bound: with the cores
    # busy, fewer threads also run the median step faster (measured 4.3x against this model's 1.86x)
    evidence += (" (predicted speed-up: the steps' own tail gone, the mean step falling by "
                 f"{own - median:.2f} ms; fewer threads may gain more, since the median step also waits for cores "
                 "the other processes hold)")
    return Verdict("thread_oversubscription", evidence, action, speedup(mean, mean - (own - median)),
                   threads_lever(keep), title=words[0], brief=words[1], fix=f"torch.set_num_threads({keep})")


def _busy_probed(r: WatchResult, c: Context, keep: int, evidence: str, action: str,
                 words: tuple[str, str]) -> Verdict:
    """The load verdict beside busy processes, predicted from the step probe at `keep` threads beside them
    (`Context.thread_step_ms`, measured in turn after the run): forward, backward and the optimizer of the mean step
    (their waits and slow steps included, as the probe's steps had theirs) speed up by the probe's ratio, the rest of
    the step as it was (a save or a data wait waits for a core at any thread count)."""
    now, fixed = c.thread_step_ms or (0.0, 0.0)
    evidence += (f"; a training step of the run's matrix size ({matmul_side(r)} wide) took {now:.2f} ms with "
                 f"{r.process.torch_threads} threads and {fixed:.2f} with {keep}, beside the same processes (measured "
                 "in turn after the run)")
    step = run_step_ms(r)
    predicted = None
    if 0 < fixed < now and step:
        work = sum(r.phases[name].share for name in COMPUTE) * step
        predicted = speedup(step, step - work * (1 - fixed / now))
        evidence += (f" (predicted speed-up: forward, backward and the optimizer, {work:.2f} ms of the mean step, at "
                     "that ratio)")
    elif fixed >= now:  # more threads took more of the shared cores from the other processes
        evidence += " (no speed-up predicted: the advised count ran no faster beside these processes)"
    return Verdict("thread_oversubscription", evidence, action, predicted, threads_lever(keep), title=words[0],
                   brief=words[1], fix=f"torch.set_num_threads({keep})",
                   unpredicted=None if predicted is not None else
                   f"a step measured no faster at {keep} thread{'s' if keep > 1 else ''} beside these processes")


def _waited(r: WatchResult, judged: bool) -> str | None:
    """"; its threads lost 152.30 ms a step waiting for a core (44% of the step; ...)" where the phases' waits were read
    and are JUDGED_APART of the step or more; `judged`: other processes were busy, and the other verdicts are judged
    without the waits (`registry.diagnose`). Else None."""
    share = waits_share(r)
    if share is None or share < JUDGED_APART:
        return None
    wait = waited_ms(r)
    load = r.load
    assert load is not None  # the waits were read
    by_phase = sorted(((load.phase(name).wait_ms or 0.0, name) for name in r.phases), reverse=True)
    where = ", ".join(f"{name} {ms:.2f}" for ms, name in by_phase[:3] if ms > 0)
    steal = f"; the VM's steal time {load.steal_share:.1%}" if load.steal_share is not None else ""
    judging = ", and the other verdicts are judged on the phases less their waits" if judged else ""
    return (f"; the training thread and its intra-op threads lost {wait:.2f} ms a step waiting for a core "
            f"({share:.0%} of the step: {where}{steal}; Linux's run-queue counts){judging}"
            + (_turns(r) if judged else ""))


def _turns(r: WatchResult) -> str:
    """"; in 89% of the samples ... both were on one CPU ..." where the run's threads took turns on one core
    (`Load.threads_one_cpu_share` at TURNS_SHARE or more), else ""."""
    share = r.load.threads_one_cpu_share if r.load is not None else None
    if share is None or share < TURNS_SHARE:
        return ""
    return (f"; in {share:.0%} of the samples with two of its threads runnable, two were on one CPU: they took turns "
            "on one core (as where the other processes share this process's scheduling group: one container or CPU "
            "cgroup, or one session with autogroup off), and a thread that finished its part of a parallel op spins "
            "at the op's end on the core the other needs, time on a core that the phases less their waits keep: the "
            "verdicts about the script may hold it (the doctor run again at one intra-op thread, or with the other "
            "processes in a session or container of their own, judges them without it)")


def _less(parts: list[str], own: float | None = None) -> str:
    """", less the evaluations 3.10 ms (their own verdicts': 41.20 ms)" where other verdicts claim part of the tail."""
    if not parts:
        return ""
    left = f": {own:.2f} ms" if own is not None else ""
    return f", less {' and '.join(parts)} (their own verdicts'){left}"
