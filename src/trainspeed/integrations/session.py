"""What both callbacks share: a doctor started when training starts and reported when it ends, that never stops
the user's training. An error of trainspeed's own is said once and watching stops; a second callback in the same
run (attached twice) warns and stays idle, so one report is written; nothing the framework writes is touched.
"""

from __future__ import annotations

import dataclasses
import sys
import warnings
from pathlib import Path
from typing import Any

from trainspeed._io import check_writable_file, new_run_dir
from trainspeed.doctor import Doctor

_active: list[CallbackSession] = []
"""The session watching now (at most one per process)."""


class CallbackSession:
    """A doctor run by a framework's callback: `begin()` at the start of training, `end()` at its end."""

    def __init__(self, json: str | Path | None = None, html: str | Path | None = None, out: str | Path | None = None,
                 warmup: int | None = None, summary: bool = True, window: tuple[int, int] | str | None = None) -> None:
        from trainspeed.watch.window import window_of

        self.window = window_of(window)
        """The steps to watch (None: the whole training): the report is written as they end, training going on."""
        for path in (json, html):
            if path is not None and str(path) != "-":
                check_writable_file(str(path))  # a path that cannot be written is said now, not after training
        self.json, self.html, self.out, self.warmup, self.summary = json, html, out, warmup, summary
        self.doctor: Doctor | None = None
        self.report: Any = None
        """The DoctorReport of the run, once it ended (None before, or where watching stopped)."""
        self.failed = False

    def _release(self) -> Doctor | None:
        """The doctor, no longer this session's; the session no longer the one watching."""
        doctor, self.doctor = self.doctor, None
        if self in _active:
            _active.remove(self)
        return doctor

    def _fail(self, where: str, error: BaseException) -> None:
        """Say once that trainspeed failed, stop watching, and let training go on."""
        self.failed = True
        warnings.warn(f"trainspeed stopped watching ({where}: {type(error).__name__}: {error}); training goes on "
                      "unwatched", RuntimeWarning, stacklevel=3)
        doctor = self._release()
        if doctor is not None:
            try:
                doctor.stop()
            except Exception:  # noqa: BLE001 - already failing: the user's run matters more than our cleanup
                pass

    def begin(self) -> None:
        if self.failed or self.doctor is not None:
            return
        if _active:
            warnings.warn("a trainspeed callback is already watching this run: this one stays idle (one report)",
                          RuntimeWarning, stacklevel=3)
            return
        try:
            self.doctor = Doctor(warmup=self.warmup, window=self.window,
                                 on_report=self._window_closed if self.window is not None else None)
            self.doctor.start()
            _active.append(self)
        except Exception as e:  # noqa: BLE001 - never the user's training's end
            self._fail("starting", e)

    def end(self, script: str | None = None) -> None:
        doctor = self.doctor
        if doctor is None:
            return
        try:
            self._release()
            doctor.stop()
            self.report = dataclasses.replace(doctor.result(), script=script or (sys.argv[0] or None))
            self._write()
        except Exception as e:  # noqa: BLE001 - the run is over and trained; a report that failed is said once
            self._fail("reporting", e)

    def _window_closed(self, report: Any) -> None:
        """The window closed (the doctor's hooks out): the report written while training waits, then goes on."""
        try:
            self._release()
            self.report = dataclasses.replace(report, script=sys.argv[0] or None)
            self._write()
        except Exception as e:  # noqa: BLE001 - the training goes on; a report that failed is said once
            self._fail("reporting", e)

    def abandon(self) -> None:
        """Training raised: stop watching without a report."""
        doctor = self._release()
        if doctor is not None:
            try:
                doctor.stop()
            except Exception as e:  # noqa: BLE001
                self._fail("stopping", e)

    def _write(self) -> None:
        from trainspeed.report.files import write_doctor_report

        folder = new_run_dir(str(self.out), "doctor") if self.out is not None else None
        write_doctor_report(self.report, folder=folder, html=None if self.html is None else str(self.html),
                            json=None if self.json is None else str(self.json))
        if self.summary:
            from rich.console import Console

            Console(stderr=True).print(self.report)  # the report renders itself (report/views.py)
