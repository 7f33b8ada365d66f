"""Which of trainspeed's source files one watched step runs through: the step path a reader follows.

    python benchmarks/step_path.py

Watches the seed's Iris loop with a default `Watcher()` and records (sys.setprofile) every Python call made into
trainspeed's own source between one step's end and the next: for a detailed step (every module call, backward and
optimizer step timed) and for an edges-only step, each after the warm-up, the profiler window and the step
sample's filling, and over 100 steps in a row (quiet runs among them). Prints, for each, the files in the order
first entered and how many calls went to each. The sampler thread is left out (it runs beside the step, not in it).
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from doctor_overhead import iris_stepper  # noqa: E402

import trainspeed  # noqa: E402
from trainspeed.watch import Watcher  # noqa: E402

SRC = str(Path(trainspeed.__file__).resolve().parent)
WORKLOADS = str(Path(SRC) / "workloads")
"""The seed loop's data (trainspeed's own Iris split) is the loop's, not the watcher's: left out."""


def _recorded(step: Any, steps: int) -> Counter[str]:
    """Calls into trainspeed's source files while `step(steps)` runs, on this thread, by file."""
    calls: Counter[str] = Counter()
    me = threading.get_ident()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and threading.get_ident() == me:
            name = frame.f_code.co_filename
            if name.startswith(SRC) and not name.startswith(WORKLOADS):  # the loop's own data is no step's
                calls[name[len(SRC) + 1:]] += 1

    sys.setprofile(profile)
    try:
        step(steps)
    finally:
        sys.setprofile(None)
    return calls


def main() -> None:
    loop = iris_stepper()
    loop(50)  # torch's first calls
    with Watcher(sample_hz=1e-4) as w:  # the sampler asleep: its thread is no step's
        loop(600)  # warm-up, the window, 256 detailed steps in the sample and beyond
        detailed = _find(loop, w, want_detailed=True)
        plain = _find(loop, w, want_detailed=False)
        hundred = _recorded(loop, 100)
    for name, calls in (("a detailed step", detailed), ("an edges-only step", plain),
                        ("100 steps in a row, every file any of them entered", hundred)):
        print(f"{name}: {len(calls)} files, {sum(calls.values())} calls")
        for path, n in calls.items():
            print(f"  {path:45s} {n:6d}")


def _find(loop: Any, w: Any, want_detailed: bool) -> Counter[str]:
    """One step of the kind wanted, recorded: steps are run one at a time until the watcher's next one is."""
    for _ in range(20000):
        if _detailed(w) == want_detailed:
            return _recorded(loop, 1)
        loop(1)
    raise SystemExit(f"no {'detailed' if want_detailed else 'edges-only'} step came")


def _detailed(w: Any) -> bool:
    """Whether the step that starts now is detailed (the per-call hooks in)."""
    return not w.hooks.paused


if __name__ == "__main__":
    main()
