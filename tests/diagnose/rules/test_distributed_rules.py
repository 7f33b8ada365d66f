"""comm_bound, straggler and the scaling model, on recorded numbers (no processes needed)."""

from __future__ import annotations

import dataclasses

import pytest
from recorded_runs import CTX, recorded

from trainspeed.diagnose.rules import diagnose
from trainspeed.diagnose.rules.distributed import comm_bound, straggler
from trainspeed.diagnose.scaling import bus_bandwidth_gbs, predict, ring_factor
from trainspeed.watch.comm import summarise
from trainspeed.watch.dist_result import DistRun, RankStat

MIB = 2**20


def rank(i: int, median: float, exposed: float, other: float = 0.5, comm: float | None = None) -> RankStat:
    phases = {"forward": 1.0, "backward": 2.0, "optimizer": 0.5, "other": other, "comm": exposed}
    return RankStat(i, f"node{i}", 90, median, phases, comm if comm is not None else exposed + 1.0, exposed, 4.0 * MIB)


def with_ranks(step: float, comm_share_ms: float, ranks: list[RankStat]) -> object:
    r = recorded(step, {"forward": 1.0, "backward": 2.0, "optimizer": 0.5, "comm": comm_share_ms}, ops=None)
    d = DistRun(len(ranks), "nccl", 0, 4 * MIB, ranks[0].comm_ms, ranks[0].exposed_ms, None, 10.0, ranks, [])
    return dataclasses.replace(r, distributed=d)


def test_comm_spans_union_and_exposed_wait() -> None:
    # buckets ready at 0, 1, 2 ms; done at 1.5, 2.5, 4 ms: union 0..4 = 4 ms; exposed 4 - 2 = 2 ms
    step = summarise([(0.000, 0.0015, 10), (0.001, 0.0025, 20), (0.002, 0.004, 30)])
    assert step is not None
    assert step.comm_s == pytest.approx(0.004) and step.exposed_s == pytest.approx(0.002)
    assert (step.nbytes, step.buckets) == (60, 3)
    assert summarise([]) is None


def test_ring_model() -> None:
    assert ring_factor(1) == 0.0 and ring_factor(2) == 1.0 and ring_factor(8) == pytest.approx(1.75)
    # 100 MB in 10 ms over 2 ranks: 10 GB/s of bus bandwidth
    assert bus_bandwidth_gbs(100e6, 0.010, 2) == pytest.approx(10.0)
    assert bus_bandwidth_gbs(100e6, 0.010, 1) is None
    points = predict(compute_ms=20.0, backward_ms=8.0, grad_bytes=100e6, bus_gbs=10.0, worlds=(1, 2, 8))
    assert [p.world_size for p in points] == [1, 2, 8]
    assert points[0].step_ms == 20.0 and points[0].efficiency == 1.0
    assert points[1].comm_ms == pytest.approx(10.0) and points[1].exposed_ms == pytest.approx(2.0)
    assert points[2].comm_ms == pytest.approx(17.5) and points[2].step_ms == pytest.approx(29.5)
    assert points[2].efficiency == pytest.approx(20 / 29.5)


def test_comm_bound_when_the_all_reduce_is_exposed() -> None:
    r = with_ranks(10.0, 4.0, [rank(0, 10.0, 4.0), rank(1, 10.0, 4.2)])
    v = comm_bound(r, CTX)
    assert v is not None and v.id == "comm_bound"
    assert "4.00 ms of the 10.00 ms step (40%)" in v.evidence and "no_sync()" in v.action
    assert v.predicted_speedup == pytest.approx(10.0 / (10.0 - 4.0 * 0.75), abs=0.01)
    assert comm_bound(with_ranks(10.0, 0.5, [rank(0, 10.0, 0.5), rank(1, 10.0, 0.5)]), CTX) is None
    single = dataclasses.replace(r, distributed=dataclasses.replace(r.distributed, world_size=1))  # type: ignore[arg-type]
    assert comm_bound(single, CTX) is None


def test_straggler_is_named_with_its_slow_phase_and_not_mistaken_for_comm() -> None:
    # rank 2 spends 4 ms more in "other"; ranks 0, 1 and 3 wait for it inside the all-reduce
    ranks = [rank(0, 10.0, 4.3), rank(1, 10.0, 4.2), rank(2, 10.0, 0.3, other=4.5), rank(3, 10.0, 4.1)]
    r = with_ranks(10.0, 4.3, ranks)
    v = straggler(r, CTX)
    assert v is not None
    assert v.evidence.startswith("rank 2 (node2) is busy 9.70 ms per step against 5.80 ms")
    assert "its other phase takes 4.00 ms more" in v.evidence
    assert v.predicted_speedup == pytest.approx(10.0 / (10.0 - 3.9), abs=0.01)
    found = [x.id for x in diagnose(r, CTX)]
    assert found[0] == "straggler" and "comm_bound" not in found  # the wait was the straggler, not the network


def test_balanced_ranks_have_no_straggler() -> None:
    r = with_ranks(10.0, 1.0, [rank(0, 10.0, 1.0), rank(1, 10.0, 1.02)])
    assert straggler(r, CTX) is None
