"""The invariants every doctor report keeps, checked on recorded runs: each check can fail."""

from __future__ import annotations

import dataclasses

import pytest
from recorded_runs import CTX, recorded, with_load

from trainspeed.diagnose.invariants import InconsistentReport, checked, inconsistencies
from trainspeed.diagnose.rules import diagnose
from trainspeed.diagnose.verdict import Verdict
from trainspeed.watch.result import Evaluation, PhaseStat
from trainspeed.watch.sites import SyncSite


def test_a_recorded_run_and_its_verdicts_add_up() -> None:
    r = recorded(10.0, {"data": 4.0, "forward": 2.0, "backward": 3.0, "optimizer": 0.5}, flops=1e6)
    assert inconsistencies(r, diagnose(r, CTX)) == []


def test_each_invariant_is_checked() -> None:
    r = recorded(10.0, {"forward": 5.0, "backward": 4.0})
    bad_share = dict(r.phases, other=PhaseStat(1.0, None, 0.9))  # shares now sum past 1
    found = inconsistencies(dataclasses.replace(r, phases=bad_share), [])
    assert any("sum to 1.8" in f for f in found) and not any("outside 0..1" in f for f in found)
    assert inconsistencies(dataclasses.replace(r, steps=dataclasses.replace(r.steps, measured=101)),
                           []) == ["101 steps measured of 100 seen"]
    # 94 measured steps of a 10 ms median: the loop lasts 0.47 s at the least
    short = dataclasses.replace(r, steps=dataclasses.replace(r.steps, loop_s=0.4))
    assert inconsistencies(short, []) == ["the training loop's 0.400 s is shorter than half its 94 measured steps "
                                          "at their median 10.000 ms (0.470 s): one of the two figures is wrong"]
    assert inconsistencies(dataclasses.replace(r, steps=dataclasses.replace(r.steps, loop_s=0.5)), []) == []
    assert "under the median" in inconsistencies(dataclasses.replace(r, steps=dataclasses.replace(r.steps, p90_ms=5.0)), [])[0]
    ev = Evaluation(count=20, mean_ms=10.0, share=0.5, every_steps=10.0, by="model.eval()")
    assert "do not fit in 100 steps" in inconsistencies(dataclasses.replace(r, evaluation=ev), [])[0]
    cuda = dataclasses.replace(r, model=dataclasses.replace(r.model, device="cuda"))
    assert "1.20 syncs per step" in inconsistencies(dataclasses.replace(cuda, steps=dataclasses.replace(cuda.steps, syncs_per_step=1.2), reads=dataclasses.replace(cuda.reads, sync_sites=[])), [])[0]
    site = SyncSite("a.py:1", "item", 1, 1.0)
    assert inconsistencies(dataclasses.replace(cuda, steps=dataclasses.replace(cuda.steps, syncs_per_step=1.2),
                                               reads=dataclasses.replace(cuda.reads, sync_sites=[site])), []) == []
    assert inconsistencies(dataclasses.replace(r, steps=dataclasses.replace(r.steps, host_reads_per_step=1.2),
                                               reads=dataclasses.replace(r.reads, host_read_sites=[site])), []) == []
    assert "1.20 reads of CPU tensors per step" in \
        inconsistencies(dataclasses.replace(r, steps=dataclasses.replace(r.steps, host_reads_per_step=1.2)), [])[0]
    # a read of a CPU tensor waits for nothing: a CPU run has no syncs
    assert "syncs per step on a CPU run" in \
        inconsistencies(dataclasses.replace(r, steps=dataclasses.replace(r.steps, syncs_per_step=1.2),
                                            reads=dataclasses.replace(r.reads, sync_sites=[site])), [])[0]
    assert "predicts 0.90x" in inconsistencies(r, [Verdict("launch_bound", "", "", 0.9)])[0]
    every = Evaluation(count=5, mean_ms=3000.0, share=1.0, every_steps=4.0, by="model.eval()")
    assert "evaluation takes 100.0% of a run whose steps trained" in \
        inconsistencies(dataclasses.replace(r, evaluation=every), [])[0]
    load = Verdict("thread_oversubscription", "other processes kept 0.9 of this machine's 2 hardware threads", "", 1.2)
    # the mean under the 10 ms median: no tail to blame on the load
    under = dataclasses.replace(r, steps=dataclasses.replace(r.steps, mean_ms=9.0))
    assert "blames other processes for a tail the steps do not have" in inconsistencies(under, [load])[0]
    # two verdicts that take out the same time: their parts of the run add up to more than the run
    evaluations, data = Verdict("evaluation_heavy", "", "", 4.0), Verdict("input_bound", "", "", 2.0)
    assert "evaluation_heavy and input_bound predict to save (75% + 50%) is the whole run or more" in \
        inconsistencies(r, [evaluations, data])[0]
    assert inconsistencies(r, [evaluations, Verdict("input_bound", "", "", 1.25)]) == []  # 75% + 20%
    # beside busy processes the script's verdicts are judged on its run less the waits for a core: their parts are
    # of that shorter run (an image classifier beside two busy processes, 2026-11-28: the waits 83% of the step, the
    # data 30% of the rest)
    busy = with_load(dataclasses.replace(r, steps=dataclasses.replace(r.steps, mean_ms=10.0)),
                     {p: 8.3 * s.share for p, s in r.phases.items()}, others_cpu_cores=1.5)
    load, data = Verdict("thread_oversubscription", "", "", 1 / 0.17), Verdict("input_bound", "", "", 1 / 0.7)
    assert inconsistencies(busy, [load, data]) == []  # 83% + 30% of the other 17%
    quiet = with_load(busy, others_cpu_cores=0.0)
    assert "predict to save (83% + 30%)" in inconsistencies(quiet, [load, data])[0]
    # unless the waits for a core were read (a Lightning run beside busy processes, 2026-11-28: mean 115 ms, median
    # 180 ms): the verdict then rests on them, and the mean and median say nothing about it
    assert inconsistencies(with_load(under, {"forward": 1.0}), [load]) == []
    assert inconsistencies(dataclasses.replace(r, steps=dataclasses.replace(r.steps, mean_ms=12.0)), [load]) == []


def test_a_report_says_so_and_a_strict_one_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    r = recorded(10.0, {"forward": 5.0})
    r = dataclasses.replace(r, steps=dataclasses.replace(r.steps, measured=101))
    monkeypatch.delenv("TRAINSPEED_STRICT")
    assert checked(r, []) == ["trainspeed's own numbers do not add up here, read them with care: "
                              "101 steps measured of 100 seen"]
    monkeypatch.setenv("TRAINSPEED_STRICT", "1")
    with pytest.raises(InconsistentReport, match="101 steps measured"):
        checked(r, [])


def test_an_op_faster_than_this_cpu_can_run_is_a_time_that_is_not_the_ops() -> None:
    """A convolution's 14.5 GFLOP a step in 1.82 ms (8 TFLOP/s on a CPU probed at 189 GFLOP/s): the report says that
    figure is wrong; one at the probe's rate, one in bfloat16 (AMX runs it faster) and a CUDA op's launch pass."""
    from trainspeed.watch.result import OpTime

    r = recorded(10.0, {"forward": 5.0, "backward": 4.0})
    ctx = dataclasses.replace(CTX, matmul_gflops=189.0)
    conv = OpTime("aten.convolution", "float32", 20, 1.82, True, 14.5e9, "forward")
    fine = OpTime("aten.mm", "float32", 4, 2.0, True, 0.3e9, "forward")  # 150 GFLOP/s
    half = dataclasses.replace(conv, dtype="bfloat16")
    ran = dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=[conv, fine, half]))
    found = inconsistencies(ran, [], ctx)
    assert len(found) == 1 and found[0].startswith("aten.convolution (float32) would run 14.50 GFLOP a step in 1.820 ms")
    assert "7967 GFLOP/s against this CPU's measured 189" in found[0]
    assert inconsistencies(ran, []) == []  # without the probe's rate nothing to hold it to
    cuda = dataclasses.replace(ran, model=dataclasses.replace(ran.model, device="cuda"))
    assert inconsistencies(cuda, [], ctx) == []
    # beside processes that kept a core busy all run long the probe read a part of the CPU's rate: no ceiling
    assert inconsistencies(with_load(ran, others_cpu_cores=1.0), [], ctx) == []
