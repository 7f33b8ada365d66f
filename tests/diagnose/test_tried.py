"""diagnose/tried.py: `doctor --try`'s measured speed-up with its interval, and the losses' check."""

from __future__ import annotations

import math

import pytest

from trainspeed.diagnose.tried import TriedLever, check_losses, speedup
from trainspeed.diagnose.verdict import Lever


def test_the_speedup_is_the_geometric_mean_of_the_rounds_ratios_with_a_t_interval() -> None:
    measured, interval = speedup([2.0, 2.2, 1.8], [1.0, 1.0, 1.0])
    logs = [math.log(2.0), math.log(2.2), math.log(1.8)]
    assert measured == pytest.approx(math.exp(sum(logs) / 3))
    assert interval is not None and interval[0] < measured < interval[1]
    # Student's t with 2 degrees of freedom: 4.30 standard errors either side (the normal's 1.96 would be too narrow)
    sd = math.sqrt(sum((x - sum(logs) / 3) ** 2 for x in logs) / 2)
    assert math.log(interval[1] / measured) == pytest.approx(4.3027 * sd / math.sqrt(3), rel=1e-3)


def test_one_round_has_no_interval_and_no_round_no_figure() -> None:
    assert speedup([3.0], [1.5]) == (2.0, None)
    assert speedup([], []) == (None, None)
    assert speedup([2.0, 2.0], [1.0, 1.0]) == (2.0, (2.0, 2.0))  # no spread: no width


def test_losses_the_same_bit_for_bit_or_the_largest_relative_difference() -> None:
    same = check_losses([[1.0, 0.5, 0.25], [1.0, 0.5, 0.25]], [1.0, 0.5, 0.25])
    assert same.same and same.max_relative == 0.0 and same.plain_repeat
    assert same.text == "the same 3 losses, bit for bit"
    off = check_losses([[1.0, 0.5]], [1.0, 0.5000001])
    assert not off.same and off.max_relative == pytest.approx(2e-7) and off.plain_repeat is None
    assert off.text == "largest relative difference 2e-07 over 2 losses"
    shorter = check_losses([[1.0, 0.5, 0.25]], [1.0, 0.5])
    assert not shorter.same and shorter.compared == 2 and "(2 losses against 3)" in shorter.text


def test_an_unseeded_script_cannot_be_checked() -> None:
    c = check_losses([[1.0, 0.5], [1.1, 0.4]], [1.0, 0.5])
    assert c.plain_repeat is False and c.text.startswith("not comparable")
    assert check_losses([[]], []).text.startswith("no loss seen")


def test_a_prediction_within_a_quarter_of_the_measured_gain() -> None:
    lever = Lever("threads", {"threads": 1}, "torch.set_num_threads(1)", False)
    row = TriedLever("thread_oversubscription", lever, 1.5, 1.3, None, [1.3], [1.0])
    assert row.within
    assert not TriedLever("x", lever, 2.0, 1.3, None, [1.3], [1.0]).within
    assert TriedLever("x", lever, None, 1.3, None, [1.3], [1.0]).within is None
