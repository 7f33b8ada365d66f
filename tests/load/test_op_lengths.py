"""Which end of a phase's waits' bounds holds: its ops' length against one wait for a core."""

from __future__ import annotations

import pytest
import torch

from trainspeed.load.waits import long_op_share


def test_ops_far_longer_than_a_wait_lose_about_the_longest_wait_and_far_shorter_the_joint() -> None:
    assert long_op_share([(1.0, 0.100)], 0.008) == pytest.approx(0.100 / 0.108)  # 100 ms products, 8 ms waits
    assert long_op_share([(1.0, 0.00001)], 0.008) < 0.002  # 10 us ops: every wait stalls them
    assert long_op_share([(1.0, 0.008)], 0.008) == pytest.approx(0.5)


def test_each_op_counts_by_its_share_of_the_phase_s_time() -> None:
    mixed = [(0.75, 0.024), (0.25, 0.00001)]  # three quarters of the time in 24 ms ops
    assert long_op_share(mixed, 0.008) == pytest.approx(0.75 * 0.75, abs=1e-3)


def test_without_ops_or_without_a_wait_the_joint_wait_stands() -> None:
    assert long_op_share([], 0.008) == 0.0
    assert long_op_share([(1.0, 0.010)], 0.0) == 0.0



def test_a_phase_s_op_lengths_weigh_each_op_by_its_time_there() -> None:
    from collections import Counter

    from trainspeed.load.op_lengths import phase_op_lengths

    ops = torch.ops.aten
    mm, add = (ops.mm.default.overloadpacket, torch.float32), (ops.add.default.overloadpacket, torch.float32)
    rate = {mm: 1e-11, add: 1e-9}  # the least seconds per FLOP and per element given
    calls = {"forward": Counter({(*mm, 10**9): 4, (*add, 10**5): 4}), "optimizer": Counter({(*add, 10**5): 16})}
    lengths = phase_op_lengths(rate, calls)  # a product of 10 ms, an add of 0.1 ms
    forward = dict((seconds, share) for share, seconds in lengths["forward"])
    assert forward == pytest.approx({0.010: 0.040 / 0.0404, 0.0001: 0.0004 / 0.0404})
    assert lengths["optimizer"] == ((pytest.approx(1.0), pytest.approx(0.0001)),)
