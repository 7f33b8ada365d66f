"""Another thread's frame, read with the garbage collector held off (CPython gh-106883) and left as it was."""

from __future__ import annotations

import gc
import threading

from trainspeed.watch.frames import thread_frame


def test_another_threads_frame_is_read_and_the_collector_left_as_the_script_had_it() -> None:
    started, halt = threading.Event(), threading.Event()

    def waiting_here() -> None:
        started.set()
        halt.wait(10)

    t = threading.Thread(target=waiting_here)
    t.start()
    started.wait(10)
    states = []
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            frame = thread_frame(t.ident or 0)
            states.append(gc.isenabled())
            names = []
            while frame is not None:
                names.append(frame.f_code.co_name)
                frame = frame.f_back
            assert "waiting_here" in names
    finally:
        gc.enable()
        halt.set()
        t.join()
    assert states == [True, False]  # the collector as the caller had it, on either side
    assert thread_frame(-1) is None  # no such thread


def test_the_collector_is_off_while_the_frames_are_read(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import sys

    seen = []
    real = sys._current_frames
    monkeypatch.setattr(sys, "_current_frames", lambda: (seen.append(gc.isenabled()), real())[1])
    thread_frame(threading.get_ident())
    assert seen == [False] and gc.isenabled()
