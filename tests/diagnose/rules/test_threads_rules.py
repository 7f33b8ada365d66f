"""thread_oversubscription, threads_unused and memory_pressure on recorded measurements: GPU runs judged without a GPU."""

from __future__ import annotations

import dataclasses

from recorded_runs import CTX, ids, recorded, with_load

from trainspeed.diagnose.rules import Context, diagnose
from trainspeed.watch.result import LoaderInfo


def test_thread_oversubscription_and_memory_pressure() -> None:
    r = recorded(110.0, {"forward": 40.0, "backward": 65.0, "optimizer": 2.0}, ops=30, flops=1e10, threads=32,
                 loaders=[LoaderInfo(8, True, 64, True)], peak=15 * 2**30, capacity=16 * 2**30)
    found = diagnose(r, Context(2.0, 100.0, 8, 16, largest_batch=48))
    assert {"thread_oversubscription", "memory_pressure"} <= {v.id for v in found}
    memory = next(v for v in found if v.id == "memory_pressure")
    assert "48" in memory.action and "bf16 autocast" in memory.action
    # a run under bfloat16 autocast already: not advised again
    found = diagnose(dataclasses.replace(r, model=dataclasses.replace(r.model, autocast="bfloat16")),
                     Context(2.0, 100.0, 8, 16, largest_batch=48))
    memory = next(v for v in found if v.id == "memory_pressure")
    assert "autocast" not in memory.action and "activation checkpointing" in memory.action


def test_a_training_and_a_validation_loader_count_the_workers_of_one() -> None:
    # examples/realistic/frame_rows.py's shape on 4 cores: each loader has 2 workers; they take turns
    r = recorded(15.0, {"data": 9.0, "forward": 2.0, "backward": 2.0, "optimizer": 1.0}, ops=90, flops=3e5, batch=32,
                 threads=2, loaders=[LoaderInfo(2, False, 32, False, batches=500), LoaderInfo(2, False, 32, False)])
    four = Context(2.0, 100.0, physical_cores=4, logical_threads=4)
    assert "thread_oversubscription" not in ids(r, four)  # 2 threads beside 2 workers: 4 on 4 cores
    busy = next(v for v in diagnose(dataclasses.replace(r, process=dataclasses.replace(r.process, torch_threads=3)),
                                    four) if v.id == "thread_oversubscription")
    assert "3 intra-op threads beside 2 DataLoader worker processes (the most any of its loaders has" in busy.evidence
    assert "torch.set_num_threads(2)" in busy.action


def test_workers_are_counted_by_the_cores_they_kept_busy_where_measured() -> None:
    """examples/realistic/dcgan.py's shape: 2 threads beside 2 workers of an in-memory TensorDataset on 2 cores, the
    workers 10.7 ms of CPU a 152 ms step (0.07 cores): not too many threads (one thread ran the script 0.70x as fast,
    2026-12-02); workers busy making batches are."""
    from trainspeed.watch.result import WorkerCpu

    r = recorded(152.0, {"data": 5.0, "forward": 55.0, "backward": 89.0, "optimizer": 3.0}, ops=400, flops=7.6e9,
                 batch=64, threads=2, loaders=[LoaderInfo(2, False, 64, False, batches=32)])
    two = Context(2.0, 100.0, physical_cores=2, logical_threads=2)
    assert "thread_oversubscription" in ids(r, two)  # unmeasured: each worker a busy process
    idle = dataclasses.replace(r, machine=dataclasses.replace(r.machine, loader_workers=WorkerCpu(r.steps.measured,
                                                                                                 10.7)))
    assert "thread_oversubscription" not in ids(idle, two)
    busy = dataclasses.replace(r, machine=dataclasses.replace(r.machine, loader_workers=WorkerCpu(r.steps.measured,
                                                                                                 120.0)))
    v = next(v for v in diagnose(busy, two) if v.id == "thread_oversubscription")
    assert "2 DataLoader worker processes (they kept 0.79 cores busy, measured) on 2 cores" in v.evidence


def test_more_threads_than_cores_predicts_from_a_matmul_at_each_count() -> None:
    # many_threads.py (scratch, 2026-11-23): 8 intra-op threads on 2 cores, a 15 ms MLP step; measured after,
    # 2 threads ran 1.4x faster
    from trainspeed.diagnose.rules import matmul_side, threads_candidate
    from trainspeed.watch.result import OpTime

    ctx = Context(2.0, 120.0, physical_cores=2, logical_threads=2)
    rows = [OpTime("aten.mm", "float32", 5, 8.6, True, 681.6e6), OpTime("aten.addmm", "float32", 3, 3.9, True, 407.9e6),
            OpTime("aten.relu", "float32", 2, 0.35, False, None)]
    r = recorded(15.2, {"forward": 4.8, "backward": 8.5, "optimizer": 0.8}, ops=55, flops=1.09e9, threads=8)
    r = dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=rows, op_ms_per_step=13.0),
                            steps=dataclasses.replace(r.steps, mean_ms=15.8))
    assert threads_candidate(r, 2) == 2 and matmul_side(r) == 408  # (681.6e6 / 5 / 2) ** (1 / 3)
    assert threads_candidate(dataclasses.replace(r, process=dataclasses.replace(r.process, torch_threads=2)), 2) is None
    assert threads_candidate(dataclasses.replace(r, loaders=dataclasses.replace(r.loaders,
                                                                                each=[LoaderInfo(2, False, 64, False)])), 2) is None
    assert matmul_side(dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=[]))) == 256
    verdict = next(v for v in diagnose(r, dataclasses.replace(ctx, thread_gflops=(100.0, 125.0)))
                   if v.id == "thread_oversubscription")
    assert "100 GFLOP/s with 8 threads and 125 with 2" in verdict.evidence
    # without the step probe: 12.5 ms of matrix ops and relu's work beyond 30 dispatches a call (0.35 - 2 x 30 x 2
    # us), a fifth of it saved; the mean step down to the median less that
    parallel = 12.5 + 0.35 - 2 * 30 * 0.002
    assert verdict.predicted_speedup == round(15.8 / (15.2 - parallel * 0.2), 2) == 1.25
    # with it: a training step of the run's matrix size took 6.0 ms at 8 threads and 3.4 at 2; forward, backward and
    # the optimizer (14.1 ms of the median step) at that ratio, the mean step down to the median less that
    stepped = next(v for v in diagnose(r, dataclasses.replace(ctx, thread_gflops=(100.0, 125.0),
                                                              thread_step_ms=(6.0, 3.4)))
                   if v.id == "thread_oversubscription")
    assert "a training step of the run's matrix size (408 wide) took 6.00 ms with 8 threads and 3.40 with 2" \
        in stepped.evidence and "a floor" in stepped.evidence
    assert stepped.predicted_speedup == round(15.8 / (15.2 - 14.1 * (1 - 3.4 / 6.0)), 2) == 1.74
    slower = next(v for v in diagnose(r, dataclasses.replace(ctx, thread_gflops=(125.0, 100.0)))
                  if v.id == "thread_oversubscription")
    assert slower.predicted_speedup is None and "125 GFLOP/s with 8 threads" in slower.evidence
    # a container held to 2 CPUs of a 16-core machine, torch at its default of one thread per core: 16
    held = Context(2.0, 120.0, physical_cores=16, logical_threads=32, usable_cores=2, thread_gflops=(100.0, 125.0))
    boxed = next(v for v in diagnose(dataclasses.replace(r, process=dataclasses.replace(r.process, torch_threads=16)),
                                     held) if v.id == "thread_oversubscription")
    assert "(2 of them this process may use" in boxed.evidence and "torch.set_num_threads(2)" in boxed.action
    assert boxed.predicted_speedup is not None and threads_candidate(r, 16, usable=2) == 2
    unprobed = next(v for v in diagnose(r, ctx) if v.id == "thread_oversubscription")
    assert unprobed.predicted_speedup is None and "GFLOP/s" not in unprobed.evidence


def test_fewer_threads_than_cores_on_matrix_work_is_threads_unused() -> None:
    # one_thread.py (scratch, 2026-11-23): torch.set_num_threads(1) on 2 cores, the same 15 ms MLP step; a matmul
    # of its size ran at 88 GFLOP/s on 1 thread and 160 on 2, and 2 threads ran the loop about 1.5x faster
    from trainspeed.diagnose.rules import threads_candidate
    from trainspeed.watch.result import OpTime

    rows = [OpTime("aten.mm", "float32", 5, 9.0, True, 681.6e6), OpTime("aten.addmm", "float32", 3, 4.5, True, 407.9e6)]
    r = recorded(15.2, {"forward": 4.8, "backward": 8.5, "optimizer": 0.8}, ops=55, flops=1.09e9, threads=1)
    r = dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=rows, op_ms_per_step=13.5),
                            steps=dataclasses.replace(r.steps, mean_ms=15.6))
    ctx = Context(2.0, 160.0, physical_cores=2, logical_threads=2, thread_gflops=(88.0, 160.0))
    verdict = next(v for v in diagnose(r, ctx) if v.id == "threads_unused")
    assert verdict.evidence.startswith("torch uses 1 intra-op thread on 2 cores; a matmul of the run's size ran at "
                                       "88 GFLOP/s with 1 thread and 160 with 2")
    assert "torch.set_num_threads(2)" in verdict.action
    assert verdict.predicted_speedup == round(15.6 / (15.6 - 13.5 * (1 - 88 / 160)), 2)
    assert threads_candidate(r, 2) == 2 and threads_candidate(r, 2, usable=1) is None  # a process held to 1 CPU
    assert threads_candidate(dataclasses.replace(r, loaders=dataclasses.replace(r.loaders,
                                                                                each=[LoaderInfo(1, False, 64, False)])), 2) is None
    assert threads_candidate(with_load(r, others_cpu_cores=1.0),
                             2) is None
    # little matrix work, or no faster on more threads: nothing to say
    small = dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=[dataclasses.replace(rows[0], ms=0.5)]))
    assert "threads_unused" not in ids(small, ctx)
    assert "threads_unused" not in ids(r, dataclasses.replace(ctx, thread_gflops=(88.0, 85.0)))
    assert "threads_unused" not in ids(r, dataclasses.replace(ctx, usable_cores=1))


def test_a_busy_machine_s_tail_is_the_steps_own_not_the_evaluations_or_the_mean_under_the_median() -> None:
    """The load verdict predicts from the steps' own tail: a run validating every 4 steps (mean 751 ms, median
    48 ms, the validations evaluation_heavy's) gets none of their time; a mean under the median is no tail."""
    import dataclasses

    from trainspeed.watch.result import Evaluation

    ctx = Context(2.0, 100.0, physical_cores=2, logical_threads=2)
    base = recorded(48.0, {"forward": 15.0, "backward": 20.0, "optimizer": 5.0}, ops=None, threads=2)
    busy = dataclasses.replace(with_load(base, others_cpu_cores=0.9),
                               steps=dataclasses.replace(base.steps, p90_ms=60.0))
    # 700 ms a step of validations, and 3 ms of the steps' own waits for a core
    validating = dataclasses.replace(busy, evaluation=Evaluation(
        count=20, mean_ms=2800.0, share=0.93, every_steps=4.0, step_ms=700.0, in_run=21), steps=dataclasses.replace(busy.steps, mean_ms=751.0))
    v = next(v for v in diagnose(validating, ctx) if v.id == "thread_oversubscription")
    assert v.predicted_speedup == round(751.0 / (751.0 - 3.0), 2)  # was "at least 10x": the mean over the median
    assert "less the evaluations 700.00 ms (their own verdicts'): 51.00 ms" in v.evidence
    all_validation = dataclasses.replace(validating, steps=dataclasses.replace(validating.steps,
                                                                               mean_ms=748.0))  # the tail is the validations, every ms of it
    assert "thread_oversubscription" not in ids(all_validation, ctx)
    # a tail the data waits explain all but 0.01 ms of (a TensorDataset loader's run beside bursty load): nothing left
    waits = dataclasses.replace(busy, steps=dataclasses.replace(busy.steps, mean_ms=52.0, median_ms=48.0))
    waits = dataclasses.replace(waits, phases={**waits.phases, "data": dataclasses.replace(
        waits.phases["data"], share=(4.0 - 0.01 + waits.phases["data"].host_ms) / 52.0)})
    assert "thread_oversubscription" not in ids(waits, ctx)
    under = dataclasses.replace(busy, steps=dataclasses.replace(busy.steps, mean_ms=331.14, median_ms=372.77,
                                                                p90_ms=400.0))  # its own evidence against it
    assert "thread_oversubscription" not in ids(under, ctx)


def test_other_processes_on_the_cores_torchs_threads_need_are_thread_oversubscription() -> None:
    # the seed's loop beside a busy process on the 2-vCPU VM: the median step unchanged, the mean 3x it
    import dataclasses

    ctx = Context(2.0, 100.0, physical_cores=2, logical_threads=2)
    base = recorded(0.5, {"forward": 0.15, "backward": 0.2, "optimizer": 0.1}, ops=None, threads=2)
    times = [0.45] * 8 + [4.5, 4.6]
    busy = dataclasses.replace(with_load(base, others_cpu_cores=0.64),
                               steps=dataclasses.replace(base.steps, times_ms=times, p90_ms=4.5))
    found = {v.id: v for v in diagnose(busy, ctx)}
    verdict = found["thread_oversubscription"]
    assert "0.6 of this machine's 2 hardware threads" in verdict.evidence and "p90 4.50" in verdict.evidence
    assert "torch.set_num_threads(1)" in verdict.action
    assert verdict.predicted_speedup == round(sum(times) / len(times) / 0.5, 2)
    exact = next(v for v in diagnose(dataclasses.replace(busy, steps=dataclasses.replace(busy.steps, mean_ms=1.25)),
                                     ctx) if v.id == "thread_oversubscription")
    assert exact.predicted_speedup == 2.5 and "the mean step is 1.25 ms" in exact.evidence  # the sums' mean first
    # not called an upper bound: on a loaded machine one thread against two measured 4.3x, past this model's 1.86x
    assert "upper bound" not in exact.evidence and "fewer threads may gain more" in exact.evidence
    # a quiet machine, one intra-op thread, or room for every thread: nothing to say
    for quiet in (with_load(busy, others_cpu_cores=0.3),
                  with_load(busy, others_cpu_cores=None),
                  dataclasses.replace(busy, process=dataclasses.replace(busy.process, torch_threads=1))):
        assert "thread_oversubscription" not in ids(quiet, ctx)
    assert "thread_oversubscription" not in ids(with_load(busy, others_cpu_cores=4.0), CTX)  # 8 of 16


def test_beside_busy_processes_the_load_verdict_predicts_from_a_step_at_the_advised_count() -> None:
    """With the step probe at the advised thread count beside the same processes (`Context.thread_step_ms`), the load
    verdict's prediction is that probe's: forward, backward and the optimizer of the mean step at its ratio, the rest
    of the step as it was; not the step without its waits (which no thread count gives)."""
    base = recorded(40.0, {"forward": 10.0, "backward": 14.0, "optimizer": 6.0}, ops=None, threads=2)
    busy = with_load(base, others_cpu_cores=2.0)
    probed = Context(2.0, 100.0, physical_cores=2, logical_threads=2, thread_step_ms=(9.0, 3.0))
    v = next(v for v in diagnose(busy, probed) if v.id == "thread_oversubscription")
    step = busy.steps.mean_ms or busy.steps.median_ms
    assert step is not None
    work = sum(busy.phases[p].share for p in ("forward", "backward", "optimizer")) * step
    assert v.predicted_speedup == round(step / (step - work * (1 - 3.0 / 9.0)), 2)
    assert "took 9.00 ms with 2 threads and 3.00 with 1, beside the same processes" in v.evidence
    assert "torch.set_num_threads(1)" in v.action
    # no faster step at one thread, no tail and no wait read: nothing says the run waited for a core
    slower = Context(2.0, 100.0, physical_cores=2, logical_threads=2, thread_step_ms=(3.0, 4.0))
    assert "thread_oversubscription" not in ids(busy, slower)
    tailed = dataclasses.replace(busy, steps=dataclasses.replace(busy.steps, mean_ms=60.0))  # a tail: said, unpredicted
    v = next(v for v in diagnose(tailed, slower) if v.id == "thread_oversubscription")
    assert v.predicted_speedup is None and "took 3.00 ms with 2 threads and 4.00 with 1" in v.evidence
    assert "no speed-up predicted: the advised count ran no faster beside these processes" in v.evidence


def test_more_threads_than_cores_beside_busy_processes_predicts_from_the_probe_beside_them() -> None:
    """More threads than cores and other processes on them: the step probe's mean steps were measured beside those
    processes, and the prediction is theirs as in `_busy_probed` (no tail gone on top: the mean steps hold it)."""
    base = recorded(40.0, {"forward": 10.0, "backward": 14.0, "optimizer": 6.0}, ops=None, threads=4)
    busy = dataclasses.replace(with_load(base, others_cpu_cores=1.0),
                               steps=dataclasses.replace(base.steps, mean_ms=60.0))
    probed = Context(2.0, 100.0, physical_cores=2, logical_threads=2, thread_step_ms=(8.0, 4.0))
    v = next(v for v in diagnose(busy, probed) if v.id == "thread_oversubscription")
    work = sum(busy.phases[p].share for p in ("forward", "backward", "optimizer")) * 60.0
    assert v.predicted_speedup == round(60.0 / (60.0 - work * 0.5), 2)
    assert "took 8.00 ms with 4 threads and 4.00 with 2, beside the same processes" in v.evidence
    assert "own tail" not in v.evidence and "torch.set_num_threads(2)" in v.action


def test_threads_taking_turns_on_one_cpu_beside_busy_processes_are_said_in_the_load_verdict() -> None:
    """Where the run's threads were runnable on one CPU in most samples (`Load.threads_one_cpu_share`), the load
    verdict says they took turns on one core and that the script's verdicts may hold the spin at each parallel op's
    end; not below TURNS_SHARE, nor unread."""
    from trainspeed.diagnose.rules.threads import TURNS_SHARE

    base = recorded(40.0, {"forward": 10.0, "backward": 14.0, "optimizer": 6.0}, ops=None, threads=2)
    waits = {"forward": 6.0, "backward": 9.0, "optimizer": 3.0}
    ctx = Context(2.0, 100.0, physical_cores=2, logical_threads=2)

    def evidence(share: float | None) -> str:
        r = with_load(base, waits, others_cpu_cores=1.0, threads_one_cpu_share=share)
        return next(v for v in diagnose(r, ctx) if v.id == "thread_oversubscription").evidence

    said = evidence(0.89)
    assert "lost 18.00 ms a step waiting for a core" in said
    assert "in 89% of the samples with two of its threads runnable, two were on one CPU: they took turns" in said
    assert "spins at the op's end on the core the other needs" in said
    for quiet in (TURNS_SHARE - 0.01, None):
        assert "took turns" not in evidence(quiet)
