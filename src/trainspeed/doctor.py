"""The doctor, composed: watch a run (`watch/`), judge it (`diagnose/`), and hand the report to `report/`.

`watch/` measures and returns measurements; it imports nothing of `diagnose/`. This module is the one place
that joins the two: `Doctor` is a `Watcher` whose `result()` runs the machine probes and the rules on what
it measured, and `watch(...)` (also `trainspeed.watch(...)`) starts one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import psutil

from trainspeed.diagnose.report import DoctorReport
from trainspeed.diagnose.verdict import named_script
from trainspeed.errors import UsageError
from trainspeed.measure import diagnose_run
from trainspeed.watch.runner import ScriptOutcome, run_target
from trainspeed.watch.session import Watcher
from trainspeed.watch.window import WindowSpec, window_of

__all__ = ["Doctor", "DoctorReport", "diagnose_watched", "script_report", "watch", "watch_script"]


def diagnose_watched(watcher: Watcher) -> DoctorReport:
    """The doctor's report on what `watcher` measured: measure (the watch), measure the machine for it
    (`trainspeed.measure`), judge (`diagnose`)."""
    return diagnose_run(watcher.measurements(), subject=watcher.subject())


class Doctor(Watcher):
    """A `Watcher` that also judges: `result()` gives the doctor's DoctorReport (measurements, hardware,
    verdicts). With a window, `on_report` is handed the report as the window closes, the script waiting for it (the
    probes and the rules run then, and the seconds they held the training are in the report's `run_window`)."""

    def __init__(self, *args: Any, on_report: Callable[[DoctorReport], None] | None = None, **kwargs: Any) -> None:
        kwargs["on_close"] = self._window_closed if on_report is not None else None
        super().__init__(*args, **kwargs)
        self.on_report = on_report
        self.report: DoctorReport | None = None
        """The report made as the window closed (None: not yet, or no `on_report`)."""

    def _window_closed(self, watcher: Watcher) -> None:
        t0 = time.perf_counter()
        report = diagnose_watched(self)
        w = report.watch
        if w.run_window is not None:
            held = dataclasses.replace(w.run_window, held_s=round(time.perf_counter() - t0, 3))
            report = dataclasses.replace(report, watch=dataclasses.replace(w, run_window=held))
        self.report = report
        if self.on_report is not None:
            self.on_report(report)

    def result(self) -> DoctorReport:
        return self.report if self.report is not None else diagnose_watched(self)


def watch(warmup: int | None = None, steps: int | None = None, profile_steps: int = 3, sample_hz: float = 50.0,
          detail_every: int = 32, trace: bool = False, window: tuple[int, int] | str | None = None,
          on_report: Callable[[DoctorReport], None] | None = None) -> Doctor:
    """Watch a training loop: `with trainspeed.watch() as w: ...` then `w.result()`. `trace=True` also keeps
    the timeline of the kept steps (`w.measurements().trace`; `trainspeed.report.trace.chrome_trace`).
    `window=(50, 150)` (or "50:150", "120s") watches those steps only: before them the steps are only counted, after
    them nothing is installed and the loop runs as if never watched; `on_report` gets the report as the window closes
    (`print` shows its short screen), while the loop waits."""
    spec = window_of(window)
    if spec is not None and steps is not None:
        raise UsageError("window= and steps= do not go together: a window watches part of a run that goes on")
    return Doctor(warmup=warmup, steps=steps, profile_steps=profile_steps, sample_hz=sample_hz,
                  detail_every=detail_every, trace=trace, window=spec, on_report=on_report)


def _process_seconds() -> float | None:
    """Wall seconds since this process started (the interpreter, the imports, the script): what a user times."""
    try:
        return time.time() - psutil.Process().create_time()
    except psutil.Error:
        return None


def watch_script(target: str, args: list[str], module: bool, *, warmup: int | None = None, steps: int | None = None,
                 trace: bool = False, source: str | None = None, window: WindowSpec | None = None,
                 on_report: Callable[[DoctorReport], None] | None = None,
                 on_start: Callable[[Doctor], None] | None = None, every: int = 0,
                 on_every: Callable[[Watcher], None] | None = None) -> tuple[Doctor, ScriptOutcome, float | None]:
    """Run a script (or module) as python would, watched: the watcher (stopped), how the script ended, and the
    process's seconds until then (None where unknown). `source`: a text run in place of the script's file (a patched
    copy). `window`: only those steps watched, `on_report` handed the report as it closes, while the script waits.
    `on_start`: called with the watcher as it starts (the live line); `on_every`: after every `every` steps, the
    hooks in (`--report-every`)."""
    watcher = Doctor(warmup=warmup, steps=steps, trace=trace, window=window, on_report=on_report, every=every,
                     on_every=on_every)
    watcher.start()
    if on_start is not None:
        on_start(watcher)
    try:
        outcome = run_target(target, args, module, source)
    finally:
        process_s = _process_seconds()  # the script's end: the probes after it are the doctor's, not its
        watcher.stop()
    return watcher, outcome, process_s


def script_report(watcher: Doctor, outcome: ScriptOutcome, process_s: float | None, script: str) -> DoctorReport:
    """The doctor's report on a watched script: the diagnosis, and how the script ended."""
    report = watcher.result()
    return dataclasses.replace(report, script=script, exit_code=outcome.exit_code, error=outcome.error,
                               process_s=process_s, verdicts=named_script(report.verdicts, script))
