"""comm_bound on a sharded (FSDP2) run, on recorded numbers: the evidence adds up and each lever's prediction is the
arithmetic of the run's own figures."""

from __future__ import annotations

import dataclasses

import pytest
from recorded_runs import CTX, recorded

from trainspeed.diagnose.rules.distributed import comm_bound
from trainspeed.diagnose.rules.sharded import keep_gathered, larger_units
from trainspeed.watch.dist_result import GROUP, CallProbe, CollectiveStat, DistRun, FsdpLayout, RankStat, growth
from trainspeed.watch.result import WatchResult

MIB = 2**20
UNIT = 64 * 1024

# a 2-rank run of 32 one-layer units and a root, every unit resharding after forward (the figures of a gloo run of
# examples/fsdp_train.py, rounded): per step 66 all-gathers, 33 of them in backward, and 33 reduce-scatters
GATHER = CollectiveStat("all_gather", 66, 66 * UNIT, 48.0, 48.0, 33, 24.0)
SCATTER = CollectiveStat("reduce_scatter", 33, 33 * UNIT, 32.0, 32.0, 33, 32.0)
PROBES = [CallProbe("all_gather", UNIT, 0.20), CallProbe("all_gather", GROUP * UNIT, 0.25),
          CallProbe("reduce_scatter", UNIT, 0.20), CallProbe("reduce_scatter", GROUP * UNIT, 0.30)]
HOST = {"pre_forward": 15.0, "post_forward": 2.5, "pre_backward": 12.0, "post_backward": 11.0,
        "root_post_backward_final_callback": 0.5}
LAYOUT = FsdpLayout(33, [UNIT] * 32 + [UNIT // 3], UNIT // 3, 33, 33 * UNIT, 1, None, False)


def sharded(step: float = 140.0, comm: float = 80.0, collectives: list[CollectiveStat] | None = None,
            probes: list[CallProbe] | None = None, layout: FsdpLayout | None = LAYOUT, hosts: int = 1) -> WatchResult:
    r = recorded(step, {"forward": 25.0, "backward": 30.0, "optimizer": 2.0, "comm": comm}, ops=None)
    ranks = [RankStat(i, f"node{i % hosts}", 90, step, {}, comm, comm, 6.0 * MIB) for i in range(2)]
    d = DistRun(2, "gloo", 0, 0, None, None, None, None, ranks, [], [],
                collectives if collectives is not None else [GATHER, SCATTER],
                PROBES if probes is None else probes, HOST, layout)
    return dataclasses.replace(r, distributed=d)


def test_growth_is_the_probe_ratio_and_never_under_one() -> None:
    assert growth(PROBES, "all_gather") == pytest.approx(1.25)
    assert growth([CallProbe("all_gather", UNIT, 0.3), CallProbe("all_gather", 4 * UNIT, 0.2)], "all_gather") == 1.0
    assert growth(PROBES[:1], "all_gather") is None


def test_larger_units_count_fewer_calls_their_growth_and_the_host_work() -> None:
    r = sharded()
    d = r.distributed
    assert d is not None
    lever = larger_units(d, {s.kind: s for s in d.collectives})
    assert lever is not None
    ratio = 9 / 33  # 32 one-layer units in groups of 4, and the root
    expected = (48 - 48 * ratio * 1.25) + (32 - 32 * ratio * 1.5) + sum(HOST.values()) * (1 - ratio)
    assert lever[0] == pytest.approx(expected)
    assert "33 units -> 9" in lever[1] and "all-gather 1.25x, reduce-scatter 1.50x" in lever[1]
    # too few units to merge, or no probe: no prediction from this lever
    few = dataclasses.replace(LAYOUT, units=5, unit_bytes=[UNIT] * 5)
    assert larger_units(dataclasses.replace(d, fsdp=few), {s.kind: s for s in d.collectives}) is None
    assert larger_units(dataclasses.replace(d, call_probes=[]), {s.kind: s for s in d.collectives}) is None


def test_keeping_gathered_saves_the_backward_gathers_and_their_host_work() -> None:
    d = sharded().distributed
    assert d is not None
    lever = keep_gathered(d, {s.kind: s for s in d.collectives})
    assert lever is not None
    assert lever[0] == pytest.approx(24.0 + HOST["pre_backward"] + HOST["post_forward"])
    assert f"{33 * UNIT / 2 / MIB:.2f} MiB more a rank" in lever[1]
    kept = dataclasses.replace(GATHER, backward_calls=0, backward_exposed_ms=0.0)
    assert keep_gathered(d, {"all_gather": kept}) is None


def test_comm_bound_on_a_sharded_run_takes_the_larger_lever() -> None:
    r = sharded()
    v = comm_bound(r, CTX)
    assert v is not None and v.id == "comm_bound"
    assert "66 all-gathers" in v.evidence and "33 reduce-scatters" in v.evidence
    assert "the step waits 80.00 ms of its 140.00 ms for them (57%), 0% hidden" in v.evidence
    assert v.action.startswith("shard in larger units") and "reshard_after_forward=False" in v.action
    assert "set_modules_to_forward_prefetch" in v.action and "hybrid" not in v.action
    d = r.distributed
    assert d is not None
    saved, _ = larger_units(d, {s.kind: s for s in d.collectives})  # type: ignore[misc]
    assert v.predicted_speedup == pytest.approx(140.0 / (140.0 - saved), abs=0.01)
    # ranks on two hosts without a 2-D mesh: hybrid sharding is named
    assert "hybrid sharding" in comm_bound(sharded(hosts=2), CTX).action  # type: ignore[union-attr]
    # a small exposed share: no verdict
    assert comm_bound(sharded(comm=10.0), CTX) is None


def test_without_figures_the_levers_are_named_unpredicted() -> None:
    v = comm_bound(sharded(probes=[], layout=None, collectives=[dataclasses.replace(GATHER, backward_calls=0)]), CTX)
    assert v is not None and v.predicted_speedup is None and "not predicted" in v.action
