"""optimizer_heavy and optimizer_rebuilt on recorded measurements: GPU runs judged without a GPU."""

from __future__ import annotations

import dataclasses

import pytest
from recorded_runs import adamw_run, ids, recorded

from trainspeed.diagnose.rules import Context, diagnose
from trainspeed.watch.result import WatchResult


def test_an_optimizer_stepping_tensors_one_at_a_time_is_told_to_fuse() -> None:
    ctx = Context(dispatch_us=2.0, matmul_gflops=110.0, physical_cores=2, logical_threads=2, optimizer_ms=(7.42, 1.40))
    verdict = next(v for v in diagnose(adamw_run(), ctx) if v.id == "optimizer_heavy")
    assert "AdamW updates 162 parameter tensors (foreach=False)" in verdict.evidence
    assert "7.42 ms as configured and 1.40 ms with fused=True" in verdict.evidence
    assert "AdamW(..., fused=True)" in verdict.action
    # the phase at the probe's ratio; measured: 21.6-24.0 ms steps against 12.5-15.7 ms fused (1.4x-1.9x)
    assert verdict.predicted_speedup == pytest.approx(23.87 / (23.87 - 11.95 * (1 - 1.40 / 7.42)), abs=0.01)
    # fused already, not probed (no fused kernel), or a small optimizer phase: nothing
    from trainspeed.diagnose.rules import optimizer_candidate

    assert "optimizer_heavy" not in ids(adamw_run(fused=True), ctx) and not optimizer_candidate(adamw_run(fused=True))
    assert "optimizer_heavy" not in ids(adamw_run(), dataclasses.replace(ctx, optimizer_ms=None))
    assert not optimizer_candidate(adamw_run(opt_ms=2.0))
    # a probe that contradicts the phase (the run's 11.95 ms against 1.96 ms for the same step): the phase held
    # something else, a machine busy with other processes say, and fusing would not buy what the ratio says
    assert "optimizer_heavy" not in ids(adamw_run(), dataclasses.replace(ctx, optimizer_ms=(1.96, 0.37)))
    assert "optimizer_heavy" in ids(adamw_run(), dataclasses.replace(ctx, optimizer_ms=(3.0, 0.5)))  # 4x: still


def _rebuilt_run(built: int) -> WatchResult:
    """/tmp's unseen script (2026-11-23, CPU): a new Adam built inside the loop on every step of a small MLP."""
    from trainspeed.watch.result import OptimizerInfo

    r = recorded(1.24, {"forward": 0.2, "backward": 0.33, "optimizer": 0.58, "sync": 0.01}, ops=81, flops=9.96e6,
                 batch=512, threads=2)
    return dataclasses.replace(r, optimizers=dataclasses.replace(r.optimizers,
                                                                 info=OptimizerInfo("Adam", 4, 4740, None,
                                                                                    None), built=built, build_ms=0.064))


def test_an_optimizer_built_every_step_is_told_to_build_it_once() -> None:
    ctx = Context(dispatch_us=1.74, matmul_gflops=79.0, physical_cores=2, logical_threads=2, rebuild_ms=(0.46, 0.31),
                  optimizer_ms=(0.47, 0.21))
    verdict = next(v for v in diagnose(_rebuilt_run(99), ctx) if v.id == "optimizer_rebuilt")
    assert "a new Adam was built 99 times in 100 steps" in verdict.evidence
    assert "0.46 ms against 0.31 ms" in verdict.evidence and "build the optimizer once" in verdict.action
    # the probe's difference on 99 steps of 100; measured 1.19x, pair by pair (rebuilt against kept, one process)
    assert verdict.predicted_speedup == pytest.approx(1.24 / (1.24 - 0.15 * 0.99), abs=0.01)
    # its optimizer phase holds the new one's making of its state: not probed for fusing
    assert "optimizer_heavy" not in ids(_rebuilt_run(99), ctx)
    # without the probe: the constructor's time alone, a lower bound
    bare = next(v for v in diagnose(_rebuilt_run(99), dataclasses.replace(ctx, rebuild_ms=None))
                if v.id == "optimizer_rebuilt")
    assert "lower bound" in bare.evidence and bare.predicted_speedup == pytest.approx(1.24 / (1.24 - 0.064 * 0.99), abs=0.01)
    # an optimizer built once per stage is not this
    assert "optimizer_rebuilt" not in ids(_rebuilt_run(3), ctx)


def test_two_optimizers_stepping_each_step_are_said_and_both_told_to_fuse() -> None:
    # a GAN on 2-D points (scratch, 2026-11-26): a discriminator's and a generator's Adam step every iteration;
    # the probe steps the one that delimits the steps. Both fused: 1.14x measured (median of 5 alternated runs)
    from trainspeed.watch.result import OptimizerInfo

    r = recorded(1.54, {"forward": 0.40, "backward": 0.55, "optimizer": 0.55}, ops=297, flops=13.3e6, batch=128,
                 threads=2)
    r = dataclasses.replace(r, optimizers=dataclasses.replace(r.optimizers,
                                                              info=OptimizerInfo("Adam", 6, 4417, None,
                                                                                 None)), steps=dataclasses.replace(r.steps, optimizer_steps_per_step=2.0))
    ctx = Context(dispatch_us=1.15, matmul_gflops=194.0, physical_cores=2, logical_threads=2, optimizer_ms=(0.19, 0.07))
    v = next(v for v in diagnose(r, ctx) if v.id == "optimizer_heavy")
    assert "2 optimizer steps run each step, this one's and 1 of other optimizers" in v.evidence
    assert "each optimizer fused alike" in v.evidence
    assert v.action.startswith("torch.optim.Adam(..., fused=True); the same for each optimizer that steps")
    one = next(v for v in diagnose(dataclasses.replace(r, steps=dataclasses.replace(r.steps, optimizer_steps_per_step=1.0)), ctx) if v.id == "optimizer_heavy")
    assert "optimizer steps run each step" not in one.evidence and "each optimizer" not in one.action
    # two steps in the phase are not a probe the phase contradicts: 4 x 0.12 ms for one step, 0.55 ms for two
    slow_probe = dataclasses.replace(ctx, optimizer_ms=(0.12, 0.04))
    assert "optimizer_heavy" in ids(r, slow_probe)
    assert "optimizer_heavy" not in ids(dataclasses.replace(r, steps=dataclasses.replace(r.steps, optimizer_steps_per_step=1.0)), slow_probe)


def _zeroed_run(zero_ms: float, calls: float = 6) -> WatchResult:
    """An 18.2 ms CPU step of a 512-2048-2048-10 MLP whose SGD(momentum) zeroes its 6 gradients in place each step
    (`optimizer.zero_grad(set_to_none=False)`), the profiler window's op table as the doctor read it."""
    from trainspeed.watch.result import OpTime, OptimizerInfo

    r = recorded(18.2, {"forward": 5.0, "backward": 8.6, "optimizer": 4.0}, ops=80, flops=9.4e8, batch=32, threads=2)
    rows = [OpTime("aten.mm", "float32", 5, 7.5, True, 6.3e8), OpTime("aten.add_", "float32", 18, 3.4, False, None),
            OpTime("aten.zero_", "float32", calls, zero_ms, False, None)]
    return dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=rows, op_ms_per_step=12.0),
                               optimizers=dataclasses.replace(r.optimizers, info=OptimizerInfo("SGD", 6, 9_470_000,
                                                                                               None, None)))


def test_gradients_zeroed_in_place_every_step_are_told_to_be_set_to_none() -> None:
    ctx = Context(dispatch_us=2.0, matmul_gflops=150.0, physical_cores=2, logical_threads=2)
    v = next(v for v in diagnose(_zeroed_run(0.65), ctx) if v.id == "zero_grad_kept")
    assert "6 zeroing ops for the 6 parameter tensors SGD updates took 0.65 ms of the 18.20 ms step" in v.evidence
    assert v.action.startswith("optimizer.zero_grad() (set_to_none=True")
    # the zeroing and the accumulation it makes backward do: four times the zeroing's time
    assert v.predicted_speedup == pytest.approx(18.2 / (18.2 - 0.65 * 4), abs=0.01)
    # too little to matter, fewer zeroings than the optimizer's tensors (a buffer the script zeroes), a GPU run (its
    # op table holds launches): nothing
    assert "zero_grad_kept" not in ids(_zeroed_run(0.1), ctx)
    assert "zero_grad_kept" not in ids(_zeroed_run(0.65, calls=2), ctx)
    cuda = _zeroed_run(0.65)
    assert "zero_grad_kept" not in ids(dataclasses.replace(cuda, model=dataclasses.replace(cuda.model, device="cuda")),
                                       ctx)


def _skipgram_run(optimizer_faults: float | None) -> WatchResult:
    """examples/realistic/skipgram.py under the doctor (2026-12-07, the 2-vCPU Zen 4 VM): a dense Adam over two
    50,000 x 128 embeddings, one tensor at a time; its temporaries took 25,000 fresh pages an optimizer step."""
    from trainspeed.watch.result import OptimizerInfo

    r = recorded(75.24, {"forward": 1.37, "backward": 16.34, "optimizer": 57.13}, ops=73, flops=1.0e9, batch=1024,
                 threads=2)
    return dataclasses.replace(r, optimizers=dataclasses.replace(
        r.optimizers, info=OptimizerInfo("Adam", 2, 12_800_000, None, None), page_faults=optimizer_faults),
        machine=dataclasses.replace(r.machine, page_faults_per_step=34_414.0))


def test_the_page_faults_of_an_unfused_step_are_removed_by_fusing_whether_or_not_the_probe_took_them() -> None:
    # the probe's steps back to back took 24,969 faults that run; another run's probe took none and read half the
    # time: the same arithmetic, the same prediction once each side's faults are apart (measured: 3.19x, `--fused`)
    us = 1.05
    faulting = Context(dispatch_us=1.2, matmul_gflops=170.0, physical_cores=2, logical_threads=2,
                       optimizer_ms=(54.63, 7.69), optimizer_faults=24_969, probed={"page_fault_us": us})
    clean = dataclasses.replace(faulting, optimizer_ms=(54.63 - 24_969 * us / 1e3, 7.69), optimizer_faults=0)
    one, other = (next(v for v in diagnose(_skipgram_run(25_000), ctx) if v.id == "optimizer_heavy")
                  for ctx in (faulting, clean))
    faulted = 25_000 * us / 1e3
    fused_in_run = (57.13 - faulted) * 7.69 / (54.63 - 24_969 * us / 1e3)
    assert one.predicted_speedup == other.predicted_speedup == pytest.approx(75.24 / (fused_in_run + 75.24 - 57.13),
                                                                             abs=0.01)
    assert "25,000 pages of fresh memory (98 MiB)" in one.evidence and "its own 24,969 faults" in one.evidence
    assert "fused=True, updating in place, does not take" in other.evidence and "its own" not in other.evidence
    # without a fault's cost (no page fault probe) or the run's count: the phase at the probe's ratio, as read
    bare = next(v for v in diagnose(_skipgram_run(None), faulting) if v.id == "optimizer_heavy")
    assert bare.predicted_speedup == pytest.approx(75.24 / (75.24 - 57.13 * (1 - 7.69 / 54.63)), abs=0.01)
    assert "fresh memory" not in bare.evidence
    # a phase of faults is not a probe the phase contradicts (4x the probe's step without them: a busy machine)
    slow = dataclasses.replace(clean, optimizer_ms=(8.0, 1.5))
    assert "optimizer_heavy" in ids(_skipgram_run(25_000), slow)
    assert "optimizer_heavy" not in ids(_skipgram_run(0), slow)
