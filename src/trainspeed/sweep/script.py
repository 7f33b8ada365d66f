"""`trainspeed sweep KNOB -- SCRIPT`: one knob of the user's own script turned, each value a run of the script with that
setting applied from outside (`tryout.levers`, as `doctor --try` applies a verdict's lever), for the same --steps,
alternated with the others and with a run as the script sets it, over --repeats rounds. The knobs a script takes from
outside: torch's intra-op threads and its DataLoaders' worker processes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from trainspeed.diagnose.verdict import Lever
from trainspeed.errors import UsageError
from trainspeed.load.marks import mark
from trainspeed.sweep.result import SweepResult, Trial
from trainspeed.sweep.summary import best_and_ties, summarise
from trainspeed.sweep.sweep import load_note
from trainspeed.tryout.runs import PLAIN, Arm, Script, against, run_arms

SCRIPT_KNOBS = ("threads", "workers")
AS_RUN = "as run"
"""The value of the run with nothing set: as the script and its environment have it."""


def check_knob(knob: str) -> None:
    """A knob a script takes from outside, else one line saying which do."""
    if knob not in SCRIPT_KNOBS:
        raise UsageError(f"sweep {knob} turns a built-in workload (--workload SPEC); on a script it takes "
                         f"{' or '.join(SCRIPT_KNOBS)}, and `trainspeed doctor --try SCRIPT` measures the verdicts' "
                         "levers")


def script_values(knob: str, text: str | None, cores: int) -> list[int]:
    """The values to try: --values as given (whole numbers, threads at least 1, workers at least 0), else the
    powers of two up to the cores and the cores themselves (threads), 0 to the cores (workers)."""
    least = 1 if knob == "threads" else 0
    if text is None:
        if knob == "threads":
            return sorted({2 ** i for i in range(cores.bit_length()) if 2 ** i <= cores} | {cores})
        return list(range(0, cores + 1))
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        values = []
    if not values or any(v < least for v in values):
        raise UsageError(f"--values: {knob} on a script takes whole numbers of at least {least} separated by commas, "
                         f"got {text!r}")
    return sorted(set(values))


def lever_for(knob: str, value: int) -> Lever:
    """The setting one value applies to the script's process."""
    if knob == "threads":
        return Lever("threads", {"threads": value}, f"torch.set_num_threads({value})", same_arithmetic=False)
    return Lever("dataloader", {"num_workers": value, "persistent_workers": value > 0},
                 f"DataLoader(..., num_workers={value}" + (", persistent_workers=True)" if value else ")"),
                 same_arithmetic=True)


def sweep_script(knob: str, script: Script, values: list[int], rounds: int, folder: Path,
                 say: Callable[[str], None] = lambda _line: None) -> SweepResult:
    """Each value a run of the script per round beside a run as the script has it, alternated; the points are the
    training loop's seconds a step (median of the rounds, 95% bootstrap interval), each with its speed-up over the
    script as run (paired by round) and its losses against that run's."""
    check_knob(knob)
    arms = [Arm(PLAIN, None)] + [Arm(f"{knob}-{v}", None, own_lever=lever_for(knob, v)) for v in values]
    before = mark()
    interrupted = run_arms(arms, script, rounds, folder, say)
    busy = load_note(before, mark())
    labels = [AS_RUN] + [str(v) for v in values]
    trials = [_trial(label, i, run) for label, arm in zip(labels, arms) for i, run in enumerate(arm.runs, 1)]
    points = summarise(labels, trials)
    notes = []
    repeat: bool | None = None
    for point, arm in zip(points[1:], arms[1:]):
        a = against(arm, arms[0])
        if a.measured is not None:
            point.extras["vs_as_run"] = a.measured
            if a.interval is not None:
                point.extras["vs_as_run_low"], point.extras["vs_as_run_high"] = a.interval
        check = a.losses
        if check is None:
            continue
        repeat = check.plain_repeat if repeat is None else repeat
        if not check.same and check.compared and check.plain_repeat is not False:
            notes.append(f"{knob} = {point.value}: losses differ from the script as run (largest relative "
                         f"difference {check.max_relative or 0:.2g})" +
                         (": at another thread count a matmul sums in another order" if knob == "threads" else ""))
    if repeat is False:
        notes.append("two runs of the script as run gave different losses: it draws unseeded random numbers, and "
                     "the losses say nothing of a value")
    # a point's seconds are a training step's (steps=1): each run counts its own steps
    result = SweepResult(knob=knob, workload=script.target, device="script", steps=1, repeats=rounds,
                         points=points, notes=notes, findings={"script_steps": script.steps})
    if busy:
        result.notes.insert(0, busy)
    if arms[0].failed:
        result.notes.insert(0, f"the script as run failed: {arms[0].failed}")
    if interrupted:
        result.notes.append("stopped by Ctrl-C: the rounds that finished are shown")
    result.best, result.same_as_best = best_and_ties(points)
    result.recommend(_advice(knob, result))
    return result


def _trial(label: str, repeat: int, run: dict) -> Trial:
    """One run as a trial: its training loop's seconds a step, times the steps timed (the points' unit)."""
    loop_s, steps = run.get("loop_s"), run.get("steps") or 0
    if run.get("error") or loop_s is None or steps < 2:
        return Trial(label, repeat, None, run.get("error") or "fewer than two training steps: nothing to time")
    return Trial(label, repeat, loop_s / (steps - 1))


def _advice(knob: str, result: SweepResult) -> str:
    best = next((p for p in result.points if p.value == result.best), None)
    if best is None:
        return "no value ran: see the notes and each run's output"
    if best.value == AS_RUN or AS_RUN in result.same_as_best:
        return f"keep the script's own {knob}: no value ran measurably faster than the script as run"
    ratio = best.extras.get("vs_as_run")
    k = int(best.value)
    setting = lever_for(knob, k).paste + (f" at the top of the script (or OMP_NUM_THREADS={k})" if knob == "threads"
                                          else "")
    gain = f": {ratio:.2f}x the script as run (measured)" if ratio is not None else ""
    return setting + gain
