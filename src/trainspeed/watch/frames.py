"""Another thread's current frame, read from a sampling thread without the interpreter's deadlock.

`sys._current_frames()` holds the interpreter's lock of its thread states while it builds the frames' dict; an
allocation there can start a garbage collection, and an object it frees (a `threading.local`) takes that same lock:
the sampling thread then waits on itself, holding the GIL, and the training thread waits for the GIL for ever
(CPython gh-106883, fixed in 3.12; Python 3.11's is not). A watched test loop stopped so inside `F.relu` (the
sampler at `_PyThread_CurrentFrames`, under `gc_collect_main`). The collector is held off for that one call, and
left as it was (a script that disabled it finds it disabled).
"""

from __future__ import annotations

import gc
import sys
from types import FrameType


def thread_frame(thread_id: int) -> FrameType | None:
    """The frame thread `thread_id` runs now (None where it runs none), with no garbage collection during the read.
    The caller keeps no reference to it past its sample (a frame kept keeps its locals alive)."""
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        return sys._current_frames().get(thread_id)
    finally:
        if collecting:
            gc.enable()
