"""A window of a real run: the steps the doctor watches while the script runs to its own end.

`trainspeed doctor --window 50:150` (or `trainspeed.watch(window=(50, 150))`, or a callback's `window=`) watches
steps 50 to 149 of the run and nothing else: before step 50 the step edges only count steps (the per-call hooks are
out, no read is timed, no stack is sampled); at step 150 every hook and patch comes out, as at the end of a run, the
report is made, and the script goes on as if it had never been watched. `--window 120s` watches the first 120 seconds
of steps.

torch's optimizer step hooks run from a loop over their dict, which no hook may change while it runs: a window that
ends at an optimizer step closes at the next call of the script's own step work instead (`WindowCloser`): a module's
forward, a `zero_grad`, a batch asked of a DataLoader, a backward, a save. A script that ends first closes it as the
run's end does.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainspeed.errors import UsageError
from trainspeed.watch.patching import Patches
from trainspeed.watch.result import RunWindow

MIN_STEPS = 10
"""The fewest steps a window of steps may hold: the doctor's warm-up and profiler window take its first six."""


@dataclass(frozen=True)
class WindowSpec:
    """The window asked for: steps `start` to `stop` (the run's own count, from 0; `stop` not watched), or the first
    `seconds` of steps from `start`."""

    start: int
    stop: int | None = None
    seconds: float | None = None

    @property
    def text(self) -> str:
        """As the user wrote it: "50:150", "120s"."""
        return f"{self.seconds:g}s" if self.seconds is not None else f"{self.start}:{self.stop}"

    @property
    def steps(self) -> int | None:
        """The steps the window holds (None: a span of time)."""
        return self.stop - self.start if self.stop is not None else None


_STEPS = re.compile(r"^(\d+):(\d+)$")
_SECONDS = re.compile(r"^(\d+(?:\.\d+)?)s$")


def parse_window(text: str) -> WindowSpec:
    """`A:B` (steps A to B of the run) or `Ns` (the first N seconds of steps); a UsageError of one line otherwise."""
    text = text.strip()
    if (m := _STEPS.match(text)) is not None:
        start, stop = int(m.group(1)), int(m.group(2))
        if start >= stop:
            raise UsageError(f"--window {text}: the first step must come before the last (A:B with A < B)")
        if stop - start < MIN_STEPS:
            raise UsageError(f"--window {text}: a window holds {MIN_STEPS} steps or more (the doctor's warm-up and "
                             "profiler window take its first 6)")
        return WindowSpec(start, stop)
    if (m := _SECONDS.match(text)) is not None:
        seconds = float(m.group(1))
        if seconds <= 0:
            raise UsageError(f"--window {text}: a span of time must be longer than 0 s")
        return WindowSpec(0, seconds=seconds)
    if text.startswith("-"):
        raise UsageError(f"--window {text}: steps and seconds count from 0: no negative value")
    raise UsageError(f"--window {text}: expected steps A:B (say 50:150) or seconds Ns (say 120s)")


def window_of(window: tuple[int, int] | str | WindowSpec | None) -> WindowSpec | None:
    """The Python API's `window=`: (A, B), "A:B", "120s" or a WindowSpec."""
    if window is None or isinstance(window, WindowSpec):
        return window
    if isinstance(window, str):
        return parse_window(window)
    start, stop = window
    return parse_window(f"{int(start)}:{int(stop)}")


CLOSING_CALLS: tuple[tuple[str, str, str], ...] = (
    ("torch.nn", "Module", "__call__"), ("torch.optim", "Optimizer", "zero_grad"),
    ("torch.utils.data.dataloader", "_BaseDataLoaderIter", "__next__"), ("torch", "autograd", "backward"),
    ("torch", "", "save"))
"""(module, class or attribute in it or "", name): the calls of a step's work that close a window at their first call
on the watched thread."""


class WindowCloser(Patches):
    """Closes the window at the first of `CLOSING_CALLS` the watched thread makes once armed: these patches come out,
    `close()` runs, and the call goes on through what is installed then (the original, the hooks being out)."""

    def __init__(self, close: Callable[[], None]) -> None:
        super().__init__()
        self._close = close
        self.armed = False

    def arm(self) -> None:
        import importlib

        home = threading.get_ident()
        self.armed = self.live = True
        for module_name, owner_name, name in CLOSING_CALLS:
            module = importlib.import_module(module_name)
            owner = getattr(module, owner_name) if owner_name else module
            self._patch(owner, name, functools.partial(self._closing, owner=owner, name=name, home=home))

    def _closing(self, original: Callable[..., Any], owner: Any, name: str, home: int) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self.armed and threading.get_ident() == home:
                self.disarm()
                self._closed()
                return getattr(owner, name)(*args, **kwargs)  # what is installed now: the hooks are out
            return original(*args, **kwargs)
        return wrapper

    def _closed(self) -> None:
        """`close()`, which never ends the user's training: a failure of ours is said in one line, and the script
        goes on (under TRAINSPEED_STRICT=1, the test suite's setting, it raises)."""
        try:
            self._close()
        except Exception as e:  # noqa: BLE001 - the user's run matters more than our report
            if os.environ.get("TRAINSPEED_STRICT") == "1":
                raise
            print(f"trainspeed: the window's report failed ({type(e).__name__}: {e}); the script goes on unwatched",
                  file=sys.stderr, flush=True)

    def disarm(self) -> None:
        """Take the closing patches out (the window closed, or the run ended first)."""
        if self.armed:
            self.armed = False
            self.uninstall()


class WindowTracker:
    """The window of a watched run (`window.py`'s idea): where it opened and closed in the run's steps, its clock for a
    window of seconds, and its closer. No window (`spec` None): the run is watched from its first step."""

    def __init__(self, spec: WindowSpec | None, close: Callable[[], None]) -> None:
        self.spec = spec
        self.opened_at: int | None = 0 if spec is None or spec.start == 0 else None
        """The run's step the watched steps started at (None: before the window)."""
        self.closed_at: int | None = None
        self._first_step_t = 0.0
        self.closer = WindowCloser(close)

    @property
    def before(self) -> bool:
        """Whether the window has not opened yet (the steps only count themselves)."""
        return self.opened_at is None

    def opens_with(self, step: int) -> bool:
        """Whether the window opens with the run's step `step`, starting now."""
        return self.before and self.spec is not None and step >= self.spec.start

    def open(self, at: int) -> int | None:
        """The window opens with the run's step `at`; the steps it holds (None: a span of seconds)."""
        self.opened_at = at
        return self.spec.steps if self.spec is not None else None

    def first_step_ended(self, now: float) -> None:
        """The window's first step ended now: a window of seconds counts from here (the script's set-up before it)."""
        self._first_step_t = now

    def full(self, now: float, steps_reached: bool) -> bool:
        """Whether the window has held its seconds (or, `steps_reached`, its steps), checked at a kept step's end."""
        spec = self.spec
        if spec is None or self.before:
            return False
        return now - self._first_step_t >= spec.seconds if spec.seconds is not None else steps_reached

    def closing(self, seen: int) -> None:
        """The closer fired, `seen` steps into the window."""
        self.closed_at = (self.opened_at or 0) + seen

    def part(self, seen: int) -> RunWindow | None:
        """The window the measurements cover, `seen` steps counted since it opened (before it: since the run's start);
        None without a window."""
        spec = self.spec
        if spec is None:
            return None
        steps = seen + (self.opened_at or 0)
        if self.closed_at is not None:
            return RunWindow(spec.text, self.opened_at, self.closed_at)
        if self.opened_at is not None and spec.steps is not None and seen >= spec.steps:
            return RunWindow(spec.text, self.opened_at, steps)  # full at the script's last step
        return RunWindow(spec.text, self.opened_at, None, ended_at=steps)
