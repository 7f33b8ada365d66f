"""Phase shares when only some steps are detailed."""

from __future__ import annotations

import pytest

from trainspeed.watch.phases import PHASES
from trainspeed.watch.result import StepRecord
from trainspeed.watch.session import phase_shares


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
