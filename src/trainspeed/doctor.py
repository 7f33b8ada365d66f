"""The doctor, composed: watch a run (`watch/`), judge it (`diagnose/`), and hand the report to `report/`.

`watch/` measures and returns measurements; it imports nothing of `diagnose/`. This module is the one place
that joins the two: `Doctor` is a `Watcher` whose `result()` runs the machine probes and the rules on what
it measured, and `watch(...)` (also `trainspeed.watch(...)`) starts one.
"""

from __future__ import annotations

import dataclasses
import time

import psutil

from trainspeed.diagnose.report import DoctorReport
from trainspeed.measure import diagnose_run
from trainspeed.watch.runner import ScriptOutcome, run_target
from trainspeed.watch.session import Watcher

__all__ = ["Doctor", "DoctorReport", "diagnose_watched", "script_report", "watch", "watch_script"]


def diagnose_watched(watcher: Watcher) -> DoctorReport:
    """The doctor's report on what `watcher` measured: measure (the watch), measure the machine for it
    (`trainspeed.measure`), judge (`diagnose`)."""
    return diagnose_run(watcher.measurements(), subject=watcher.subject())


class Doctor(Watcher):
    """A `Watcher` that also judges: `result()` gives the doctor's DoctorReport (measurements, hardware,
    verdicts)."""

    def result(self) -> DoctorReport:
        return diagnose_watched(self)


def watch(warmup: int = 3, steps: int | None = None, profile_steps: int = 3, sample_hz: float = 50.0,
          detail_every: int = 32, trace: bool = False) -> Doctor:
    """Watch a training loop: `with trainspeed.watch() as w: ...` then `w.result()`. `trace=True` also keeps
    the timeline of the kept steps (`w.measurements().trace`; `trainspeed.report.trace.chrome_trace`)."""
    return Doctor(warmup=warmup, steps=steps, profile_steps=profile_steps, sample_hz=sample_hz,
                  detail_every=detail_every, trace=trace)


def _process_seconds() -> float | None:
    """Wall seconds since this process started (the interpreter, the imports, the script): what a user times."""
    try:
        return time.time() - psutil.Process().create_time()
    except psutil.Error:
        return None


def watch_script(target: str, args: list[str], module: bool, *, warmup: int = 3, steps: int | None = None,
                 trace: bool = False) -> tuple[Doctor, ScriptOutcome, float | None]:
    """Run a script (or module) as python would, watched: the watcher (stopped), how the script ended, and the
    process's seconds until then (None where unknown)."""
    watcher = Doctor(warmup=warmup, steps=steps, trace=trace)
    watcher.start()
    try:
        outcome = run_target(target, args, module)
    finally:
        process_s = _process_seconds()  # the script's end: the probes after it are the doctor's, not its
        watcher.stop()
    return watcher, outcome, process_s


def script_report(watcher: Doctor, outcome: ScriptOutcome, process_s: float | None, script: str) -> DoctorReport:
    """The doctor's report on a watched script: the diagnosis, and how the script ended."""
    return dataclasses.replace(watcher.result(), script=script, exit_code=outcome.exit_code, error=outcome.error,
                               process_s=process_s)
