"""Sync-free loss recording keeps order across flushes."""

from __future__ import annotations

import torch

from trainspeed.loop.recorder import LossRecorder


def test_losses_come_back_in_order_across_flushes() -> None:
    rec = LossRecorder(torch.device("cpu"), flush_every=3)
    for i in range(7):
        rec.add(torch.tensor(float(i)))
    rec.add(torch.tensor([7.0, 8.0]))
    rec.add(torch.tensor(9.0))
    assert rec.values() == [float(i) for i in range(10)]
    assert rec.count == 10


def test_recorded_tensors_are_not_copied_until_a_flush() -> None:
    rec = LossRecorder(torch.device("cpu"), flush_every=100)
    t = torch.tensor(1.0)
    rec.add(t)
    t.fill_(2.0)  # the recorder holds the step's own tensor: the fast loop never reuses it
    assert rec.values() == [2.0]
