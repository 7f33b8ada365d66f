"""The all-reduce timer's CUDA path on recorded events: steps read back only once every bucket's
events have completed, spans measured from the step's first hand-over."""

import pytest

from trainspeed.watch.comm import CommTimer


class Event:
    """A completed (or not yet completed) CUDA event at `ms` on the device's clock."""

    def __init__(self, ms, done=True):
        self.ms, self.done = ms, done

    def query(self):
        return self.done

    def elapsed_time(self, other):
        return other.ms - self.ms


def test_device_steps_come_from_event_times_once_complete():
    timer = CommTimer()
    # step 0: two buckets, handed over at 10 and 12 ms, reduced by 13 and 15 ms
    timer.events += [(0, Event(10), Event(13), 100), (0, Event(12), Event(15), 300)]
    assert timer.take_device() == []  # the step has not ended yet
    timer.end_step()
    # step 1: its second bucket still in flight on the device
    late = Event(25, done=False)
    timer.events += [(1, Event(20), Event(22), 100), (1, Event(21), late, 300)]
    timer.end_step()
    (step,) = timer.take_device()
    assert step.comm_s == pytest.approx(0.005)  # union of [10, 13] and [12, 15]
    assert step.exposed_s == pytest.approx(0.003)  # last hand-over at 12, last result at 15
    assert (step.nbytes, step.buckets) == (400, 2)
    assert len(timer.events) == 2  # step 1 waits for its event, not read early
    late.done = True
    (step,) = timer.take_device()
    assert step.comm_s == pytest.approx(0.005) and step.exposed_s == pytest.approx(0.004)
    assert timer.events == [] and timer.take_device() == []
