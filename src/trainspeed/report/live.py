"""The live line while the doctor watches: the step, steps a second, the median step, the phase split so far and the
leading suspicion, on one line of stderr rewritten at most twice a second (rich's Live, which keeps the script's own
prints above it). Where stderr is no terminal (a CI log), one line as the window opens instead; none with --quiet.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING

from rich.console import Console
from rich.live import Live
from rich.text import Text

from trainspeed.watch.progress import Progress, Rate, progress_of

if TYPE_CHECKING:
    from trainspeed.watch.session import Watcher

REFRESH_PER_S = 2
PHASES_NAMED = 3
"""Phases named on the line, the largest first."""


def live_words(p: Progress, per_s: float | None) -> str:
    """"trainspeed: step 412 | 38.2 steps/s | median 24.1 ms | backward 41% forward 30% data 22% | suspect: data 22%"."""
    if not p.watching:
        return f"trainspeed: step {p.step}; the window {p.window} opens at step {p.opens_at}"
    parts = [f"trainspeed: step {p.step}"]
    if per_s is not None:
        parts.append(f"{per_s:.3g} steps/s")
    if p.median_ms is not None:
        parts.append(f"median {p.median_ms:.2f} ms")
    if p.shares:
        largest = sorted(p.shares.items(), key=lambda kv: kv[1], reverse=True)[:PHASES_NAMED]
        parts.append(" ".join(f"{phase} {share:.0%}" for phase, share in largest))
    suspect = p.suspect
    parts.append(f"suspect: {suspect[0]} {suspect[1]:.0%}" if suspect is not None else "no wait stands out yet")
    return " | ".join(parts)


class LiveLine:
    """The live line of one watched run: `start()` as the watch starts, `stop()` before the report prints."""

    def __init__(self, watcher: Watcher, console: Console | None = None) -> None:
        self.watcher = watcher
        self.console = console or Console(stderr=True)
        self.rate = Rate()
        self._live: Live | None = None
        self._log: threading.Event | None = None

    def _line(self) -> Text:
        try:
            p = progress_of(self.watcher)
            words = live_words(p, self.rate.read(p.step) if p.watching else None)
        except Exception:  # noqa: BLE001 - a reading that raced the training thread: the next one comes in 0.5 s
            words = "trainspeed: watching"
        return Text(words, style="dim", no_wrap=True, overflow="ellipsis")

    def start(self) -> None:
        if self.console.is_terminal and sys.stdout.isatty():  # the script's prints then reach the same terminal
            self._live = Live(console=self.console, get_renderable=self._line, refresh_per_second=REFRESH_PER_S,
                              transient=True, redirect_stdout=True, redirect_stderr=True)
            self._live.start()
        elif self.watcher.run_window.spec is not None:  # a CI log: one line as the window opens
            self._log = stop = threading.Event()
            threading.Thread(target=self._log_opening, args=(stop,), name="trainspeed-live", daemon=True).start()

    def _log_opening(self, stop: threading.Event) -> None:
        window = self.watcher.run_window
        while not stop.wait(1 / REFRESH_PER_S):
            if window.opened_at is not None:
                self.console.print(f"trainspeed doctor: the window {window.spec.text if window.spec else ''} opened "
                                   f"at step {window.opened_at}", soft_wrap=True)
                return

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self._log is not None:
            self._log.set()
            self._log = None
