"""The stack sampler's thread: it keeps no frame of the main thread, and shortens the switch interval only while no
other Python thread is busy."""

from __future__ import annotations

import sys
from typing import Any


def test_the_sampler_keeps_no_frame_of_the_main_thread_between_samples() -> None:
    """A frame object the sampler still holds when the frame returns keeps that frame's locals alive. Held
    between samples, it made `print(tensor)` in a watched loop fail now and then (torch 2.13, Python 3.11:
    "Attempted to make a tensor into a differentiable view ..."). Here the sampler samples this test's
    function until it returns; its local must be gone the moment it has."""
    import weakref

    from trainspeed.watch.sampler import Sampler

    class Local:
        pass

    sampler = Sampler(lambda: True, hz=1000.0)

    def busy() -> weakref.ref[Local]:
        local = Local()
        seen = sampler.other.total
        while sampler.other.total < seen + 3:  # pure Python: the sampler samples this frame
            pass
        return weakref.ref(local)

    sampler.start()
    try:
        gone = busy()
        alive = gone() is not None  # asked before this thread lets the sampler run again
    finally:
        sampler.stop()
    assert sampler.other.total >= 3
    assert not alive


def test_the_sampler_shortens_the_switch_interval_only_while_no_other_python_thread_is_busy() -> None:
    import threading
    import time

    from trainspeed.watch.sampler import SWITCH_S, Sampler

    before = sys.getswitchinterval()
    short = lambda: abs(sys.getswitchinterval() - SWITCH_S) <= 1e-7  # noqa: E731

    def wait_for(condition: Any, seconds: float = 5.0) -> bool:
        deadline = time.monotonic() + seconds
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.001)
        return bool(condition())

    sampler = Sampler(lambda: False, hz=1000.0)
    sampler.start()
    try:
        assert wait_for(short)  # alone with the main thread
        release = threading.Event()
        idle = threading.Thread(target=release.wait)  # asleep, as tqdm's monitor thread: no rival for the GIL
        idle.start()
        try:
            time.sleep(0.3)  # the sampler's look after the thread started (LOOK_S): it took no CPU
            assert wait_for(short)
            stop = threading.Event()

            def spin() -> None:
                while not stop.is_set():
                    pass

            busy = threading.Thread(target=spin)  # the script's own busy thread: its interval comes back
            busy.start()
            try:
                assert wait_for(lambda: sys.getswitchinterval() == before)
                time.sleep(2 * 1.0)  # two more looks see it busy
                assert sys.getswitchinterval() == before
            finally:
                stop.set()
                busy.join()
        finally:
            release.set()
            idle.join()
    finally:
        sampler.stop()
    assert sys.getswitchinterval() == before


