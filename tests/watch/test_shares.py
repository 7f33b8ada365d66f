"""Phase shares when only some steps are detailed; the steps of a GPU that sets the pace."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainspeed.watch.figures import gpu_paced, phase_shares
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


def test_a_run_half_ahead_of_its_gpu_and_half_waiting_on_it_is_paced_by_the_gpu() -> None:
    """The wide MLP's 54 measured steps on an H200 (2026-11-28): after the profiler window's synchronisation the host
    launched about half of them in a few ms each, then waited for room in CUDA's queue, a device step each."""
    ahead = [replace(_record(0.002, True, forward=0.001), device_span_s=0.070) for _ in range(28)]
    waiting = [replace(_record(0.069, True, forward=0.068), device_span_s=0.070) for _ in range(26)]
    paced = gpu_paced(ahead + waiting)
    assert paced is not None and [r.wall_s for r in paced] == [0.070] * 54


def test_a_host_bound_cuda_run_or_a_full_queue_is_not_paced_by_the_gpu() -> None:
    host_bound = [replace(_record(0.001, True, forward=0.0005), device_span_s=0.0006) for _ in range(10)]
    full_queue = [replace(_record(0.070, True, forward=0.069), device_span_s=0.0702) for _ in range(10)]
    assert gpu_paced(host_bound) is None and gpu_paced(full_queue) is None
    assert gpu_paced([_record(1.0, False)]) is None  # no device spans: a CPU run, or edges-only steps
