"""Phase shares when only some steps are detailed."""

from __future__ import annotations

import pytest

from trainspeed.watch.collect import phase_shares
from trainspeed.watch.phases import PHASES
from trainspeed.watch.result import StepRecord


def _record(wall: float, detailed: bool, **phases: float) -> StepRecord:
    full = dict.fromkeys(PHASES, 0.0)
    full.update(phases)
    full["other"] = wall - sum(v for k, v in phases.items() if k != "other")
    return StepRecord(0, wall, full, 0, 0, detailed=detailed)


def test_edge_phases_come_from_every_step_and_the_rest_from_detailed_ones() -> None:
    records = [
        _record(1.0, True, data=0.2, forward=0.4, backward=0.2),  # other 0.2
        _record(1.0, False, data=0.0),  # forward/backward/optimizer fall into other
        _record(2.0, False, checkpoint=1.0),  # a checkpoint on an edges-only step still counts
    ]
    shares, detailed = phase_shares(records)
    assert detailed == records[:1]
    assert shares["data"] == pytest.approx(0.2 / 4) and shares["checkpoint"] == pytest.approx(1.0 / 4)
    rest = 1 - 0.05 - 0.25
    assert shares["forward"] == pytest.approx(rest * 0.4 / 0.8)
    assert shares["backward"] == pytest.approx(rest * 0.2 / 0.8)
    assert shares["other"] == pytest.approx(rest * 0.2 / 0.8)
    assert sum(shares.values()) == pytest.approx(1.0)


def test_without_detailed_steps_every_step_counts_as_detailed() -> None:
    records = [_record(1.0, False, forward=0.5)]
    shares, detailed = phase_shares(records)
    assert detailed == records and shares["forward"] == pytest.approx(0.5)


def test_sums_over_every_step_replace_the_sample_for_their_phases() -> None:
    """The sample holds no checkpoint step, the sums over every step do: the checkpoint and sync
    shares come from the sums, the rest is split as the detailed records say."""
    records = [_record(1.0, True, sync=0.1, forward=0.6), _record(1.0, True, sync=0.1, forward=0.6)]
    sums = ({"data": 0.0, "h2d": 0.0, "sync": 10.0, "checkpoint": 20.0}, 200.0)
    shares, _ = phase_shares(records, sums)
    assert shares["checkpoint"] == pytest.approx(0.1) and shares["sync"] == pytest.approx(0.05)
    rest = 1 - 0.15
    assert shares["forward"] == pytest.approx(rest * 0.6 / 0.9) and shares["other"] == pytest.approx(rest * 0.3 / 0.9)
    assert sum(shares.values()) == pytest.approx(1.0)
