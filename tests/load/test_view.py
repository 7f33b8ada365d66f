"""The script's verdicts judged on its phases less their waits for a core (`load/view.py`)."""

from __future__ import annotations

import dataclasses

import pytest
from recorded_runs import recorded, with_load

from trainspeed.diagnose.rules import Context, diagnose
from trainspeed.load.result import Load, PhaseLoad
from trainspeed.load.view import without_wait
from trainspeed.watch.result import PhaseStat, WatchResult

TWO_CORES = Context(dispatch_us=2.0, matmul_gflops=100.0, physical_cores=2, logical_threads=2)


def _waited(r: WatchResult, waits: dict[str, float]) -> WatchResult:
    """`r` with each phase's wait for a core per step (ms), as the watcher gives it: a part of the phase's share of
    the mean step (its median step's unread)."""
    r = with_load(r, waits)
    assert r.load is not None
    return dataclasses.replace(r, load=dataclasses.replace(r.load, phases={
        p: dataclasses.replace(w, median_wait_share=None) for p, w in r.load.phases.items()}))


def _checkpointing_step(waits: dict[str, float] | None, step_ms: float, host: dict[str, float]) -> WatchResult:
    """A 2-thread MLP step that saves its model and Adam's state every step (scratch, 2026-11-28, the 2-vCPU Intel
    VM), alone and beside two busy processes: the phases' host times and their waits for a core as the watcher read
    them."""
    r = recorded(step_ms, host, ops=60, flops=3.5e8, batch=64, threads=2)
    r = dataclasses.replace(r, checkpoints=dataclasses.replace(r.checkpoints, saves=40, calls=40, every_steps=1.0),
                            steps=dataclasses.replace(r.steps, mean_ms=step_ms))
    return _waited(r, waits) if waits else r


ALONE = _checkpointing_step(None, 97.3, {"forward": 6.76, "backward": 8.18, "optimizer": 16.76, "checkpoint": 60.88})
BUSY_HOST = {"forward": 55.72, "backward": 88.21, "optimizer": 118.12, "checkpoint": 67.63}
BUSY_WAITS = {"forward": 44.77, "backward": 67.95, "optimizer": 98.48, "checkpoint": 26.39, "other": 5.42}


def test_beside_two_busy_processes_the_script_keeps_its_first_verdict() -> None:
    busy = _checkpointing_step(BUSY_WAITS, 345.25, BUSY_HOST)
    busy = with_load(busy, others_cpu_cores=1.9)
    alone = [v.id for v in diagnose(ALONE, TWO_CORES)]
    found = diagnose(busy, TWO_CORES)
    assert alone[0] == "checkpoint_heavy"
    script = [v.id for v in found if v.id != "thread_oversubscription"]
    assert script[0] == "checkpoint_heavy"
    load = next(v for v in found if v.id == "thread_oversubscription")
    assert "lost 243.01 ms a step waiting for a core (70% of the step: optimizer 98.48, backward 67.95, forward 44.77" in \
        load.evidence
    # judged on the wall time the save is 20% of the step, its wait for a core spread over the step's phases
    saves = next(v for v in found if v.id == "checkpoint_heavy")
    assert "41.24 ms of a 102.24 ms step (40% of the run's time)" in saves.evidence
    assert busy.load is not None
    unread = dataclasses.replace(busy, load=dataclasses.replace(busy.load, phases={
        p: dataclasses.replace(w, wait_ms=None) for p, w in busy.load.phases.items()}))
    saves = next(v for v in diagnose(unread, TWO_CORES) if v.id == "checkpoint_heavy")
    assert "67.63 ms of a 345.25 ms step (20% of the run's time)" in saves.evidence


def test_the_phases_less_their_waits_add_up_to_the_step_less_the_wait() -> None:
    busy = _checkpointing_step(BUSY_WAITS, 345.25, BUSY_HOST)
    net = without_wait(busy)
    assert net is not None
    left = 345.25 - sum(BUSY_WAITS.values())
    assert net.steps.mean_ms == pytest.approx(left) and net.steps.median_ms == pytest.approx(left)
    assert sum(p.share for p in net.phases.values()) == pytest.approx(1.0)
    assert net.phases["checkpoint"].share == pytest.approx((67.63 - 26.39) / left)
    share = busy.phases["checkpoint"].share
    assert net.phases["checkpoint"].host_ms == pytest.approx(67.63 * (1 - 26.39 / (share * 345.25)))


def test_the_process_s_cpu_use_is_its_cpu_time_over_the_step_less_the_wait() -> None:
    # 0.6 of a core busy over the measured 345.25 ms step, its threads waiting for a core the rest of it; a wait is
    # no CPU time: the same CPU seconds over the step less its 243.01 ms of waits are two cores busy, as alone
    busy = _checkpointing_step(BUSY_WAITS, 345.25, BUSY_HOST)
    busy = dataclasses.replace(busy, process=dataclasses.replace(busy.process, cpu_percent=60.0))
    net = without_wait(busy)
    assert net is not None and net.process.cpu_percent == pytest.approx(60.0 * 345.25 / (345.25 - 243.01))
    assert net.process.cpu_percent == pytest.approx(203.0, abs=0.5)
    unread = without_wait(dataclasses.replace(busy, process=dataclasses.replace(busy.process, cpu_percent=None)))
    assert unread is not None and unread.process.cpu_percent is None


def test_a_quiet_machine_s_few_waits_change_nothing() -> None:
    quiet = _waited(ALONE, {"forward": 0.11, "backward": 0.2, "optimizer": 0.28, "checkpoint": 0.05})
    assert without_wait(quiet) is None and without_wait(ALONE) is None
    assert [v.id for v in diagnose(quiet, TWO_CORES)] == [v.id for v in diagnose(ALONE, TWO_CORES)]


def test_a_wait_is_never_more_than_its_phase() -> None:
    r = _waited(recorded(10.0, {"forward": 2.0, "backward": 6.0}), {"forward": 5.0})  # a reading past its phase
    net = without_wait(r)
    assert net is not None and net.phases["forward"].share == 0.0
    assert all(isinstance(p, PhaseStat) and p.share >= 0 for p in net.phases.values())


def test_a_wait_that_comes_in_bursts_does_not_take_the_median_phase_to_nothing() -> None:
    """The seed loop beside two busy processes (2026-11-28): a median step of 0.28 ms, a scheduler slice of 4 ms lost
    now and then, so forward's mean wait is more than its median time."""
    r = recorded(0.28, {"forward": 0.08, "backward": 0.12, "optimizer": 0.05},
                 shares={"forward": 0.25, "backward": 0.4, "optimizer": 0.2})
    r = _waited(dataclasses.replace(r, steps=dataclasses.replace(r.steps, mean_ms=1.2)), {"forward": 0.15,
                                                                                          "backward": 0.2})
    net = without_wait(r)
    assert net is not None and net.phases["forward"].host_ms == pytest.approx(0.08 * (1 - 0.15 / 0.3))
    assert net.phases["optimizer"].host_ms == pytest.approx(0.05)
    # where the median detailed step did not wait (the watcher says so), the median phases and step stay as measured
    assert r.load is not None
    bursts = dataclasses.replace(r, load=dataclasses.replace(r.load, phases={
        p: dataclasses.replace(w, median_wait_share=0.0) for p, w in r.load.phases.items()}))
    net = without_wait(bursts)
    assert net is not None and net.steps.median_ms == pytest.approx(0.28)
    assert net.phases["forward"].host_ms == pytest.approx(0.08)
    assert net.phases["forward"].share < r.phases["forward"].share  # the mean's shares lose the waits


def test_a_script_s_own_threads_waiting_for_each_other_are_judged_as_they_are() -> None:
    """Waits with no other process busy (a script's workers beside its intra-op threads, more than the cores): the
    script's own cost, judged on the wall time as alone (examples/realistic/frame_rows.py lost input_bound to
    evaluation_heavy when such waits were taken out, 2026-11-28)."""
    own = _checkpointing_step(BUSY_WAITS, 345.25, BUSY_HOST)  # others_cpu_cores: None
    saves = next(v for v in diagnose(own, TWO_CORES) if v.id == "checkpoint_heavy")
    assert "67.63 ms of a 345.25 ms step" in saves.evidence and "judged on the phases" not in saves.evidence


def _float64_step_beside_busy_processes() -> WatchResult:
    """examples/float64_numpy.py --steps 150 beside two busy processes (Zen 4, 2026-11-29), as the watcher read it: a
    median step of 83.81 ms whose phases' medians come to 61.37 ms, each phase's time swinging with its waits from
    step to step. Alone the same script's step took 7.6 to 10.5 ms."""
    from trainspeed.watch.result import OpTime

    r = recorded(83.81, {}, ops=69, flops=4.44e8, batch=256, threads=2)
    measured = {"forward": PhaseStat(15.59, None, 0.3242), "backward": PhaseStat(44.61, None, 0.5910),
                "optimizer": PhaseStat(0.87, None, 0.0759), "other": PhaseStat(0.30, None, 0.0089)}
    waits = {"forward": PhaseLoad(27.00, 0.9172, 0.8665), "backward": PhaseLoad(48.85, 0.9104, 0.9052),
             "optimizer": PhaseLoad(5.93, 0.8596, 0.0), "other": PhaseLoad(0.46, 0.5704, 0.0)}
    rows = [OpTime("aten.mm", "float64", 5, 0.83, True, 2.905e8), OpTime("aten.addmm", "float64", 3, 0.43, True, 1.536e8),
            OpTime("aten.t", "float64", 14, 0.13, False, None)]
    return dataclasses.replace(
        r, phases={p: measured.get(p, PhaseStat(0.0, None, 0.0)) for p in r.phases},
        steps=dataclasses.replace(r.steps, mean_ms=90.79, p90_ms=141.49),
        window=dataclasses.replace(r.window, op_times=rows, op_ms_per_step=1.87),
        load=Load(others_cpu_cores=1.38, phases={p: waits.get(p, PhaseLoad(0.0, 0.0, 0.0)) for p in r.phases}))


def test_the_median_step_keeps_what_its_phases_medians_kept() -> None:
    """The median step less its waits in the proportion its phases' medians kept (7.48 of 61.37 ms), not less what
    they lost: the 22.4 ms by which the median step outgrows its phases' medians waited as they did. Less only what
    they lost the step came to 29.92 ms, where the float64 products at their rate (5.00 ms) fell under a fifth of it
    and `slow_dtype` went unsaid."""
    r = _float64_step_beside_busy_processes()
    net = without_wait(r)
    kept = 15.59 * (1 - 0.8665) + 44.61 * (1 - 0.9052) + 0.87 + 0.30
    assert net is not None and net.steps.median_ms == pytest.approx(83.81 * kept / 61.37)
    assert 7.6 <= net.steps.median_ms <= 10.5  # the step alone
    ctx = dataclasses.replace(TWO_CORES, matmul_gflops=191.46, dtype_gflops={"float64": 88.88}, dispatch_us=1.15)
    found = diagnose(r, ctx)
    assert [v.id for v in found[:2]] == ["thread_oversubscription", "slow_dtype"]
    assert f"5.00 ms of the {net.steps.median_ms:.2f} ms step" in found[1].evidence
