"""Verdict rules on recorded measurements: GPU runs judged without a GPU."""

from __future__ import annotations

import dataclasses

import pytest

from trainspeed.diagnose.rules import _LOGGING, Context, diagnose
from trainspeed.probe.loader import Handover
from trainspeed.watch.phases import PHASES
from trainspeed.watch.result import Evaluation, GpuUtil, LoaderInfo, OtherSite, PhaseStat, SyncSite, WatchResult

CTX = Context(dispatch_us=2.0, matmul_gflops=100.0, physical_cores=8, logical_threads=16)


def recorded(step_ms: float, host: dict[str, float], device: dict[str, float] | None = None, *, dev: str = "cpu",
             ops: float | None = 40, flops: float | None = None, syncs: float = 0.0, batch: int | None = 64,
             loaders: list[LoaderInfo] | None = None, util: GpuUtil | None = None, threads: int = 8,
             peak: int | None = None, capacity: int | None = None, h2d: float = 0.0,
             busy: float | None = None, kernels: float | None = None,
             shares: dict[str, float] | None = None) -> WatchResult:
    """A WatchResult shaped like one the watcher records; `host` phases in ms (medians), the rest is
    `other`; `device` the phases' event spans, `busy` the GPU's own work per step (the profiler
    window's); `shares` of the run's time where they differ from median over step (bursts)."""
    host = {**host, "other": step_ms - sum(host.values())}
    share = {p: host.get(p, 0.0) / step_ms for p in PHASES}
    if shares:
        share.update(shares)
        share["other"] = 1 - sum(v for p, v in share.items() if p != "other")
    phases = {p: PhaseStat(host.get(p, 0.0), (device or {}).get(p), share[p]) for p in PHASES}
    return WatchResult(
        steps_seen=100, steps_measured=94, median_ms=step_ms, p90_ms=step_ms * 1.1, phases=phases,
        syncs_per_step=syncs, h2d_bytes_per_step=h2d, h2d_bytes_by_kind={"pageable": int(h2d * 94)} if h2d else {},
        ops_per_step=ops, kernels_per_step=(kernels or ops) if dev == "cuda" else None,
        flops_per_step=flops, sync_sites=[SyncSite("train.py:42", "item", 94, syncs * step_ms)] if syncs else [],
        other_sites=[], gpu_util=util or GpuUtil(False, None, 0, False), device=dev, batch_size=batch,
        loaders=loaders or [], torch_threads=threads, process_cpu_percent=None, process_threads=None, peak_memory_bytes=peak,
        memory_capacity_bytes=capacity, step_samples=[], step_times_ms=[], gpu_busy_ms_per_step=busy,
    )


def ids(r: WatchResult, ctx: Context = CTX) -> list[str]:
    return [v.id for v in diagnose(r, ctx)]


def test_input_bound_with_sawtooth_evidence() -> None:
    util = GpuUtil(True, 35.0, 400, True, "idle 60% / busy 35%")
    r = recorded(20.0, {"data": 14.0, "forward": 2.0, "backward": 3.0, "optimizer": 0.5},
                 {"forward": 1.8, "backward": 2.9, "optimizer": 0.4}, dev="cuda", flops=5e9,
                 loaders=[LoaderInfo(0, False, 64, False)], util=util, busy=5.0)
    verdicts = diagnose(r, CTX)
    assert verdicts[0].id == "input_bound"
    assert "saw-tooth" in verdicts[0].evidence and "num_workers=0" in verdicts[0].evidence
    assert "pin_memory=True" in verdicts[0].action
    # 4 workers hide all but max(20 - 14, 14 / 4) = 6 ms: 20 / 6
    assert verdicts[0].predicted_speedup == pytest.approx(3.33, abs=0.01)


def test_sync_bound_on_gpu_predicts_host_and_device_overlapping() -> None:
    # host: 1 ms of launches + 4 ms waiting in .item(); device busy 3 ms of the 5 ms step
    r = recorded(5.0, {"forward": 0.4, "backward": 0.4, "optimizer": 0.2, "sync": 4.0},
                 {"forward": 1.2, "backward": 1.5, "optimizer": 0.3}, dev="cuda", ops=60, flops=1e8, syncs=1.0,
                 busy=3.0)
    verdicts = diagnose(r, CTX)
    sync = next(v for v in verdicts if v.id == "sync_bound")
    assert "train.py:42" in sync.evidence
    # new step = max(5 - 4, 3) = 3 ms
    assert sync.predicted_speedup == pytest.approx(5 / 3, abs=0.01)


def test_tiny_gpu_model_is_launch_bound_and_cpu_faster() -> None:
    # a tiny model on a GPU: 31 ops, each a few us of launch, the GPU almost idle, a sync per step
    r = recorded(0.9, {"forward": 0.25, "backward": 0.3, "optimizer": 0.15, "sync": 0.15},
                 {"forward": 0.26, "backward": 0.31, "optimizer": 0.16}, dev="cuda", ops=31, flops=4e4,
                 syncs=1.0, batch=120, busy=0.09)
    ctx = Context(dispatch_us=1.5, matmul_gflops=150, physical_cores=8, logical_threads=16, cuda_op_us=9.5)
    verdicts = diagnose(r, ctx)
    found = [v.id for v in verdicts]
    assert {"launch_bound", "cpu_faster", "small_batch", "sync_bound"} <= set(found)
    assert found[0] in ("cpu_faster", "launch_bound")
    # CPU step = 0.9 - 0.15 (sync) - 31 launches x (9.5 - 1.5) us + 4e4 FLOP at 150 GFLOP/s = 0.50227 ms
    cpu = next(v for v in verdicts if v.id == "cpu_faster")
    assert cpu.predicted_speedup == pytest.approx(0.9 / 0.50227, abs=0.01)
    # launch: the step without forward+backward+optimizer's 0.7 ms less the GPU's 0.09 ms of work
    launch = next(v for v in verdicts if v.id == "launch_bound")
    assert launch.predicted_speedup == pytest.approx(0.9 / (0.9 - 0.61), abs=0.01)
    assert "from its kernels' own times" in launch.evidence


def test_gpu_edge_spans_are_not_taken_for_gpu_work() -> None:
    # the seed's Iris on an H100 as the doctor recorded it (2026-11-22, before the profiler window
    # measured the GPU's work): the events at the phase edges span about the host's time, since the
    # GPU idles between launches; NVML saw the GPU busy 7.8% of the time
    host = {"forward": 0.3615, "backward": 0.5338, "optimizer": 0.2119, "sync": 0.0352}
    device = {"forward": 0.3716, "backward": 0.5771, "optimizer": 0.2191}
    util = GpuUtil(True, 7.8, 587, False, "idle 88% / busy 0% of 587 samples")
    r = recorded(1.1034, host, device, dev="cuda", ops=28, kernels=22, flops=40800, syncs=1.01, batch=120,
                 util=util)
    ctx = Context(dispatch_us=1.50, matmul_gflops=663, physical_cores=16, logical_threads=16, cuda_op_us=9.5)
    verdicts = diagnose(r, ctx)
    found = [v.id for v in verdicts]
    assert "compute_bound" not in found
    assert {"launch_bound", "cpu_faster", "small_batch"} <= set(found)
    assert "NVML utilisation" in next(v for v in verdicts if v.id == "launch_bound").evidence


def test_cpu_faster_needs_the_measured_launch_cost() -> None:
    r = recorded(0.9, {"forward": 0.25, "backward": 0.3, "optimizer": 0.15}, dev="cuda", ops=31, busy=0.09)
    found = ids(r, Context(dispatch_us=1.5, matmul_gflops=150, physical_cores=8, logical_threads=16))
    assert "launch_bound" in found and "cpu_faster" not in found


def test_a_sync_waiting_for_the_gpus_own_work_is_not_sync_bound() -> None:
    # the GPU works 9.6 of a 10 ms step; the host launches in 1 ms and waits 8.8 ms in .item()
    r = recorded(10.0, {"forward": 0.4, "backward": 0.4, "optimizer": 0.2, "sync": 8.8}, dev="cuda", ops=60,
                 flops=1e12, syncs=1.0, busy=9.6)
    assert ids(r) == ["compute_bound"]


def test_tiny_cpu_model_is_launch_bound() -> None:
    r = recorded(0.48, {"forward": 0.14, "backward": 0.16, "optimizer": 0.08, "sync": 0.01}, ops=31, flops=4e4, batch=120)
    found = diagnose(r, CTX)
    assert found[0].id == "launch_bound" and found[0].predicted_speedup and found[0].predicted_speedup > 1.5
    assert "small_batch" in [v.id for v in found] and "cpu_faster" not in [v.id for v in found]
    assert "compiled step" in found[0].action
    # a torch.compile'd model (compiled.py, scratch, 2026-11-23): not told to compile what is compiled
    compiled = diagnose(dataclasses.replace(r, compiled=True), CTX)[0]
    assert compiled.id == "launch_bound" and compiled.action.startswith("the model is compiled already")
    assert compiled.predicted_speedup == found[0].predicted_speedup


def test_cpu_launch_bound_counts_only_the_ops_of_forward_backward_and_the_optimizer() -> None:
    # examples/tensor_dataset_loader.py with a batch of 64 (2026-11-23): 168 ops per step, 131 of them the
    # DataLoader's row-by-row indexing and collation and 3 in "other"; counted as the compute's, they took the
    # bare dispatches of 131 ops off its per-op overhead, and the per-op figure came out at a third
    r = recorded(0.84, {"data": 0.35, "forward": 0.11, "backward": 0.19, "optimizer": 0.14}, ops=168, flops=2e6,
                 threads=2)
    r = dataclasses.replace(r, edge_ops_per_step=131.0, other_ops_per_step=3.0, other_op_ms_per_step=0.01)
    launch = next(v for v in diagnose(r, CTX) if v.id == "launch_bound")
    assert launch.evidence.startswith("34 ops per step in forward, backward and the optimizer average 12.9 us each")
    overhead = 0.44 - (2e6 / 100e9 * 1e3 + 34 * 2.0 / 1e3)
    assert launch.predicted_speedup == pytest.approx(0.84 / (0.84 - overhead), abs=0.01)
    counted = next(v for v in diagnose(dataclasses.replace(r, edge_ops_per_step=None, other_ops_per_step=None), CTX)
                   if v.id == "launch_bound")
    assert counted.evidence.startswith("168 ops") and counted.predicted_speedup < launch.predicted_speedup


def test_big_ops_on_a_machine_slower_than_at_its_probes_are_not_per_op_overhead() -> None:
    # examples/log_every_step.py shaped as two fresh-clone CI runs saw it (2026-11-23): its 50 ops
    # per step averaging 50 us (49 to 51 us logged; about 30 us on a usual hour) over 71 MFLOP, and a
    # JSON record flushed each step; probes as a usual hour measures them. Its arithmetic is then 24%
    # of the compute phases, under ARITHMETIC_LOW: by the step's time alone it looks launch-bound
    host = {"forward": 0.95, "backward": 1.15, "optimizer": 0.40, "sync": 0.01}
    r = recorded(3.2, host, ops=50, flops=71.04e6, batch=128, threads=2)
    log = OtherSite("train.py:31", "log.write(json.dumps(record)); log.flush()", 40, 0.67)
    r = dataclasses.replace(r, other_sites=[log])
    fast = Context(dispatch_us=1.62, matmul_gflops=120.0, physical_cores=2, logical_threads=2)
    assert 71.04e6 / 120e9 * 1e3 / 2.5 < 0.25
    assert ids(r, fast) == ["logging_heavy"]
    # with the slowest dispatch probe and a fast matmul probe seen on that VM (3.7 us, 119 GFLOP/s)
    # each op still carries over two dispatches of arithmetic (1 420 / (119 x 3.7) = 3.2)
    slow_dispatch = Context(dispatch_us=3.7, matmul_gflops=119.0, physical_cores=2, logical_threads=2)
    assert ids(r, slow_dispatch) == ["logging_heavy"]
    # the same step time made of tiny ops is per-op overhead
    tiny = dataclasses.replace(r, flops_per_step=4e4)
    assert ids(tiny, fast)[0] == "launch_bound"


def test_detailed_steps_heavier_than_the_median_step_are_scaled_to_it() -> None:
    # the demo's seed loop on this CPU (2026-11-23): forward, backward and optimizer medians from the
    # detailed steps (which carry the per-call hooks) add up to 0.63 ms of a 0.43 ms median step
    r = recorded(0.43, {"forward": 0.18, "backward": 0.25, "optimizer": 0.20, "sync": 0.003}, ops=42, flops=4.08e4,
                 batch=120, threads=2)
    phases = dict(r.phases)
    phases["other"] = dataclasses.replace(phases["other"], host_ms=0.02)
    r = dataclasses.replace(r, phases=phases)
    ctx = Context(dispatch_us=1.6, matmul_gflops=115.0, physical_cores=2, logical_threads=2)
    launch = diagnose(r, ctx)[0]
    assert launch.id == "launch_bound"
    # the room beside the edge phases (0.427 ms) shared as the detailed steps share theirs
    compute = 0.63 * (0.43 - 0.003) / (0.63 + 0.02)
    assert "of the 0.41 ms of forward+backward+optimizer" in launch.evidence
    assert "average 9.9 us each" in launch.evidence
    left = 0.43 - (compute - (4.08e4 / 115e9 * 1e3 + 42 * 1.6 / 1e3))
    assert launch.predicted_speedup == pytest.approx(0.43 / left, abs=0.01) and launch.predicted_speedup < 6


def test_big_matmuls_on_cpu_are_compute_bound() -> None:
    # 10 GFLOP at 100 GFLOP/s is 100 ms of a 110 ms step
    r = recorded(110.0, {"forward": 40.0, "backward": 65.0, "optimizer": 2.0}, ops=30, flops=1e10)
    assert ids(r) == ["compute_bound"]
    assert "(93% of 107.00 ms)" in diagnose(r, CTX)[0].evidence
    # the probe after the run slower than the run itself (8 threads on 2 cores gave 50 GFLOP/s, the run 77):
    # the arithmetic's need outgrows the time it took, and the evidence says so rather than "162%"
    slow = diagnose(r, dataclasses.replace(CTX, matmul_gflops=60.0))[0]
    assert slow.id == "compute_bound" and "more than their 107.00 ms" in slow.evidence and "%)" not in slow.evidence


def test_busy_gpu_is_compute_bound() -> None:
    r = recorded(50.0, {"forward": 15.0, "backward": 30.0, "optimizer": 3.0},
                 {"forward": 15.0, "backward": 30.0, "optimizer": 3.0}, dev="cuda", ops=300, flops=5e12, busy=46.0)
    assert ids(r) == ["compute_bound"]


def test_checkpoint_logging_and_h2d() -> None:
    r = recorded(30.0, {"forward": 5.0, "backward": 6.0, "optimizer": 1.0, "checkpoint": 17.0}, flops=1e9)
    v = diagnose(r, CTX)[0]
    assert v.id == "checkpoint_heavy" and "every" in v.action
    r = recorded(10.0, {"forward": 2.0, "backward": 3.0, "optimizer": 0.5, "h2d": 4.0}, dev="cuda",
                 device={"forward": 2.0, "backward": 3.0, "optimizer": 0.4, "h2d": 3.9}, flops=1e9, h2d=64 * 2**20,
                 busy=5.0)
    assert diagnose(r, CTX)[0].id == "h2d_bound"


@pytest.mark.parametrize("code", [
    "print(f'{loss}')", "logger.info('x')", "log.write(json.dumps(r)); log.flush(); os.fsync(log.fileno())",
    "wandb.log({'loss': l})", "writer.add_scalar('loss', l, i)", "pbar.set_postfix(loss=l)", "self.log('loss', l)",
    "mlflow.log_metric('loss', l)", "json.dump(history, f)", "sys.stdout.write(s)", "logs.append(loss.item())"])
def test_logging_lines_are_known(code: str) -> None:
    assert _LOGGING.search(code)


@pytest.mark.parametrize("code", [
    "logps.append(dist.log_prob(a))", "logits = model(x)", "out = F.log_softmax(z, -1)", "y = torch.log(p)",
    "h = p.log()", "z = torch.logsumexp(x, 0)", "x = np.log(a)", "catalog = build()"])
def test_math_named_log_is_no_logging(code: str) -> None:
    # REINFORCE's log-probability line was called a logging line (2026-11-23)
    assert not _LOGGING.search(code)


def test_thread_oversubscription_and_memory_pressure() -> None:
    r = recorded(110.0, {"forward": 40.0, "backward": 65.0, "optimizer": 2.0}, ops=30, flops=1e10, threads=32,
                 loaders=[LoaderInfo(8, True, 64, True)], peak=15 * 2**30, capacity=16 * 2**30)
    found = diagnose(r, Context(2.0, 100.0, 8, 16, largest_batch=48))
    assert {"thread_oversubscription", "memory_pressure"} <= {v.id for v in found}
    memory = next(v for v in found if v.id == "memory_pressure")
    assert "48" in memory.action


def test_more_threads_than_cores_predicts_from_a_matmul_at_each_count() -> None:
    # many_threads.py (scratch, 2026-11-23): 8 intra-op threads on 2 cores, a 15 ms MLP step; measured after,
    # 2 threads ran 1.4x faster
    from trainspeed.diagnose.rules import matmul_side, threads_candidate
    from trainspeed.watch.result import OpTime

    ctx = Context(2.0, 120.0, physical_cores=2, logical_threads=2)
    rows = [OpTime("aten.mm", "float32", 5, 8.6, True, 681.6e6), OpTime("aten.addmm", "float32", 3, 3.9, True, 407.9e6),
            OpTime("aten.relu", "float32", 2, 0.35, False, None)]
    r = dataclasses.replace(recorded(15.2, {"forward": 4.8, "backward": 8.5, "optimizer": 0.8}, ops=55, flops=1.09e9,
                                     threads=8), op_times=rows, op_ms_per_step=13.0, mean_ms=15.8)
    assert threads_candidate(r, 2) == 2 and matmul_side(r) == 408  # (681.6e6 / 5 / 2) ** (1 / 3)
    assert threads_candidate(dataclasses.replace(r, torch_threads=2), 2) is None
    assert threads_candidate(dataclasses.replace(r, loaders=[LoaderInfo(2, False, 64, False)]), 2) is None
    assert matmul_side(dataclasses.replace(r, op_times=[])) == 256
    verdict = next(v for v in diagnose(r, dataclasses.replace(ctx, thread_gflops=(100.0, 125.0)))
                   if v.id == "thread_oversubscription")
    assert "100 GFLOP/s with 8 threads and 125 with 2" in verdict.evidence
    # 12.5 ms of matrix ops and relu's work beyond 30 dispatches a call (0.35 - 2 x 30 x 2 us), a fifth of it
    # saved; the mean step down to the median less that
    parallel = 12.5 + 0.35 - 2 * 30 * 0.002
    assert verdict.predicted_speedup == round(15.8 / (15.2 - parallel * 0.2), 2) == 1.25
    slower = next(v for v in diagnose(r, dataclasses.replace(ctx, thread_gflops=(125.0, 100.0)))
                  if v.id == "thread_oversubscription")
    assert slower.predicted_speedup is None and "125 GFLOP/s with 8 threads" in slower.evidence
    # a container held to 2 CPUs of a 16-core machine, torch at its default of one thread per core: 16
    held = Context(2.0, 120.0, physical_cores=16, logical_threads=32, usable_cores=2, thread_gflops=(100.0, 125.0))
    boxed = next(v for v in diagnose(dataclasses.replace(r, torch_threads=16), held) if v.id == "thread_oversubscription")
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
    r = dataclasses.replace(recorded(15.2, {"forward": 4.8, "backward": 8.5, "optimizer": 0.8}, ops=55, flops=1.09e9,
                                     threads=1), op_times=rows, op_ms_per_step=13.5, mean_ms=15.6)
    ctx = Context(2.0, 160.0, physical_cores=2, logical_threads=2, thread_gflops=(88.0, 160.0))
    verdict = next(v for v in diagnose(r, ctx) if v.id == "threads_unused")
    assert verdict.evidence.startswith("torch uses 1 intra-op thread on 2 cores; a matmul of the run's size ran at "
                                       "88 GFLOP/s with 1 thread and 160 with 2")
    assert "torch.set_num_threads(2)" in verdict.action
    assert verdict.predicted_speedup == round(15.6 / (15.6 - 13.5 * (1 - 88 / 160)), 2)
    assert threads_candidate(r, 2) == 2 and threads_candidate(r, 2, usable=1) is None  # a process held to 1 CPU
    assert threads_candidate(dataclasses.replace(r, loaders=[LoaderInfo(1, False, 64, False)]), 2) is None
    assert threads_candidate(dataclasses.replace(r, others_cpu_cores=1.0), 2) is None
    # little matrix work, or no faster on more threads: nothing to say
    small = dataclasses.replace(r, op_times=[dataclasses.replace(rows[0], ms=0.5)])
    assert "threads_unused" not in ids(small, ctx)
    assert "threads_unused" not in ids(r, dataclasses.replace(ctx, thread_gflops=(88.0, 85.0)))
    assert "threads_unused" not in ids(r, dataclasses.replace(ctx, usable_cores=1))


def test_other_processes_on_the_cores_torchs_threads_need_are_thread_oversubscription() -> None:
    # the seed's loop beside a busy process on the 2-vCPU VM: the median step unchanged, the mean 3x it
    import dataclasses

    ctx = Context(2.0, 100.0, physical_cores=2, logical_threads=2)
    base = recorded(0.5, {"forward": 0.15, "backward": 0.2, "optimizer": 0.1}, ops=None, threads=2)
    times = [0.45] * 8 + [4.5, 4.6]
    busy = dataclasses.replace(base, others_cpu_cores=0.64, step_times_ms=times, p90_ms=4.5)
    found = {v.id: v for v in diagnose(busy, ctx)}
    verdict = found["thread_oversubscription"]
    assert "0.6 of this machine's 2 hardware threads" in verdict.evidence and "p90 4.50" in verdict.evidence
    assert "torch.set_num_threads(1)" in verdict.action
    assert verdict.predicted_speedup == round(sum(times) / len(times) / 0.5, 2)
    exact = next(v for v in diagnose(dataclasses.replace(busy, mean_ms=1.25), ctx) if v.id == "thread_oversubscription")
    assert exact.predicted_speedup == 2.5 and "the mean step is 1.25 ms" in exact.evidence  # the sums' mean first
    # a quiet machine, one intra-op thread, or room for every thread: nothing to say
    for quiet in (dataclasses.replace(busy, others_cpu_cores=0.3), dataclasses.replace(busy, others_cpu_cores=None),
                  dataclasses.replace(busy, torch_threads=1)):
        assert "thread_oversubscription" not in ids(quiet, ctx)
    assert "thread_oversubscription" not in ids(dataclasses.replace(busy, others_cpu_cores=4.0), CTX)  # 8 of 16


def test_predictions_are_capped() -> None:
    r = recorded(100.0, {"data": 99.9}, ops=None)
    assert diagnose(r, CTX)[0].predicted_speedup <= 10.0  # type: ignore[operator]


def test_bursts_of_waiting_are_judged_by_their_share_of_the_run() -> None:
    # the DataLoader-fed CNN on an H100 as the doctor recorded it (2026-11-22): the median step waits
    # 0.11 ms for data, but the waits add up to 22% of the run
    host = {"data": 0.1114, "h2d": 0.2753, "forward": 1.8283, "backward": 2.7851, "optimizer": 0.4863}
    device = {"h2d": 0.2336, "forward": 1.8698, "backward": 2.9945, "optimizer": 0.4179}
    r = recorded(6.844, host, device, dev="cuda", ops=81, kernels=105, flops=7.475e9, syncs=0.055, batch=128,
                 loaders=[LoaderInfo(2, True, 128, True)], busy=1.8748,
                 shares={"data": 0.2175, "h2d": 0.0312, "forward": 0.0932, "backward": 0.1335, "optimizer": 0.0254})
    ctx = Context(dispatch_us=2.48, matmul_gflops=128, physical_cores=16, logical_threads=16, cuda_op_us=12.15)
    verdicts = diagnose(r, ctx)
    data = next(v for v in verdicts if v.id == "input_bound")
    assert "22% of the run's time, in bursts" in data.evidence and "0.11 ms" in data.evidence
    # the median step's part is its own (0.11 of 6.84 ms), not the run's 22% again
    assert "0.11 ms of 6.84 ms there (2%)" in data.evidence and data.evidence.count("22%") == 1
    # 4 workers instead of 2 halve the wait: 1 / max(1 - 0.2175, 0.2175 * 2 / 4)
    assert data.predicted_speedup == pytest.approx(1 / 0.7825, abs=0.01)
    assert verdicts[0].id == "launch_bound" and "compute_bound" not in [v.id for v in verdicts]


def test_a_checkpoint_every_hundred_steps_is_judged_by_its_share() -> None:
    r = recorded(10.0, {"forward": 3.0, "backward": 4.0, "optimizer": 1.0}, flops=1e10,
                 shares={"checkpoint": 0.3, "forward": 0.21, "backward": 0.28, "optimizer": 0.07})
    v = diagnose(r, CTX)[0]
    assert v.id == "checkpoint_heavy" and "in bursts" in v.evidence
    assert v.action.startswith("save 30 times less often")
    assert v.predicted_speedup == pytest.approx(1 / (1 - 0.3 * (1 - 1 / 30)), abs=0.01)


def _metric_run(other_ops: float | None, other_op_ms: float | None) -> WatchResult:
    # examples/metric_every_step.py as the doctor saw it on the 2-vCPU VM (2026-11-23): a 4.82 ms
    # step, 3.85 ms of it outside every phase, 98% of those samples at the scikit-learn metric's line
    r = recorded(4.82, {"forward": 0.35, "backward": 0.45, "optimizer": 0.15, "sync": 0.02}, ops=78, flops=1.035e7,
                 batch=256, threads=2)
    sites = [OtherSite("train.py:36", 'scores.append(f1_score(yb.numpy(), out.argmax(1).numpy(), average="macro"))',
                       98, 0.98),
             OtherSite("train.py:30", "xb, yb = x[start:start + args.batch], y[start:start + args.batch]", 2, 0.02)]
    return dataclasses.replace(r, other_sites=sites, other_ops_per_step=other_ops, other_op_ms_per_step=other_op_ms)


def test_host_code_outside_every_phase_is_named_at_its_line() -> None:
    found = diagnose(_metric_run(3, 0.45), CTX)
    host = found[0]
    assert host.id == "host_code_heavy"
    assert "train.py:36" in host.evidence and "f1_score" in host.evidence and "98%" in host.evidence
    # torch's share: 0.45 ms timed + 3 ops x 2 dispatches x 2 us; the rest of other's 3.85 ms is the script's
    host_ms = 3.85 - (0.45 + 3 * 2 * 2.0 / 1e3)
    assert f"{host_ms:.2f} ms" in host.evidence
    assert host.predicted_speedup == pytest.approx(4.82 / (4.82 - host_ms), abs=0.01)


def test_a_function_the_loop_calls_is_named_by_the_loops_line_that_calls_it() -> None:
    # gen_data.py (scratch, 2026-11-23): a generator augmenting each batch in numpy over four lines; the
    # samples split 46/25/12/12% over them, and 98% ran under the loop's `for ... in enumerate(batches(400))`
    r = _metric_run(3, 0.45)
    sites = [OtherSite("gen.py:8", "out = np.stack([np.roll(o, 1, axis=0) for o in out])", 46, 0.46),
             OtherSite("gen.py:9", "noise = rng.normal(0, 0.1, out.shape)", 25, 0.25)]
    loop = [OtherSite("gen.py:13", "for step, (x, y) in enumerate(batches(400)):", 98, 0.98),
            OtherSite("gen.py:14", "loss = f(model(x), y)", 2, 0.02)]
    host = diagnose(dataclasses.replace(r, other_sites=sites, loop_sites=loop), CTX)[0]
    assert host.id == "host_code_heavy" and "46% of the stack samples there are at gen.py:8" in host.evidence
    assert "98% ran under the training loop's line gen.py:13: `for step, (x, y)" in host.evidence
    host_ms = 3.85 - (0.45 + 3 * 2 * 2.0 / 1e3)
    assert host.predicted_speedup == pytest.approx(4.82 / (4.82 - min(host_ms, 3.85 * 0.98)), abs=0.01)
    # a loop line no more than the top line's share plus LOOP_LINE_MORE: the innermost line stays the subject
    near = [dataclasses.replace(loop[0], share_of_other=0.55)]
    plain = diagnose(dataclasses.replace(r, other_sites=sites, loop_sites=near), CTX)[0]
    assert "training loop's line" not in plain.evidence
    assert plain.predicted_speedup == pytest.approx(4.82 / (4.82 - 3.85 * 0.46), abs=0.01)
    # a top line under the bar (30%) with the loop's line above it: still a verdict
    spread = [dataclasses.replace(site, share_of_other=0.2) for site in sites]
    assert diagnose(dataclasses.replace(r, other_sites=spread, loop_sites=loop), CTX)[0].id == "host_code_heavy"


def test_the_library_under_a_line_is_named_and_torch_distributions_checks_are_a_known_lever() -> None:
    r = _metric_run(3, 0.45)
    metric = dataclasses.replace(r.other_sites[0], inside="sklearn")
    host = diagnose(dataclasses.replace(r, other_sites=[metric, *r.other_sites[1:]]), CTX)[0]
    assert "most of its samples inside sklearn" in host.evidence and "validate_args" not in host.action
    # REINFORCE's line building its action distribution (2026-11-23): torch.distributions' argument checks
    dist = OtherSite("rl.py:34", "logps.append(dist.log_prob(a))", 90, 0.9, inside="torch.distributions")
    host = diagnose(dataclasses.replace(r, other_sites=[dist, *r.other_sites[1:]]), CTX)[0]
    assert host.id == "host_code_heavy" and "inside torch.distributions" in host.evidence
    assert "set_default_validate_args(False)" in host.action


def test_torch_ops_outside_the_model_are_not_the_scripts_host_code() -> None:
    # the same other time, all of it torch ops (a functional loss, indexing the batch): torch's, not the script's
    assert "host_code_heavy" not in ids(_metric_run(22, 3.8))
    # a run whose window did not count the ops outside the phases (too short, say) cannot tell them apart
    assert "host_code_heavy" not in ids(_metric_run(None, None))
    # a line that logs is logging_heavy's, not this rule's
    r = _metric_run(3, 0.45)
    log = OtherSite("train.py:40", "writer.add_scalar('f1', f1_score(y, p))", 98, 0.98)
    r = dataclasses.replace(r, other_sites=[log, *r.other_sites[1:]])
    assert ids(r)[0] == "logging_heavy" and "host_code_heavy" not in ids(r)


def test_a_line_that_builds_what_a_logging_line_writes_is_logging() -> None:
    # examples/log_every_step.py in a make test run (2026-11-24): 23% of the step outside every phase, the samples
    # split between the line building the record (with its five .item() reads) and the line writing it; with the
    # record's line taken for host code, host_code_heavy came first
    r = _metric_run(3, 0.45)
    record = OtherSite("log.py:30", 'record = {"step": step, "loss": loss.item(), "grad_norms": [p.grad.norm().item() '
                                    "for p in model.parameters()]}", 45, 0.45)
    write = OtherSite("log.py:31", 'log.write(json.dumps(record) + "\\n"); log.flush(); os.fsync(log.fileno())', 40, 0.40)
    read = SyncSite("log.py:30", "item", 5000, 12.0, record.code)
    logged = dataclasses.replace(r, other_sites=[record, write], sync_sites=[read])
    found = ids(logged)
    assert found[0] == "logging_heavy" and "host_code_heavy" not in found
    # the same record line beside a line that does not log it is the script's host code
    other = dataclasses.replace(write, code="cache.append(record_id)")
    assert ids(dataclasses.replace(logged, other_sites=[record, other]))[0] == "host_code_heavy"


def test_input_bound_with_a_worker_per_core_suggests_a_cheaper_item_not_more_workers() -> None:
    # a DataLoader with 2 workers on the 2-vCPU VM (2026-11-23): 38% of the run waiting on them
    r = recorded(10.74, {"data": 4.1, "forward": 3.0, "backward": 1.3, "optimizer": 0.5}, flops=2e8, batch=32,
                 loaders=[LoaderInfo(2, False, 32, False)], threads=2)
    ctx = Context(dispatch_us=2.0, matmul_gflops=100.0, physical_cores=2, logical_threads=2)
    data = next(v for v in diagnose(r, ctx) if v.id == "input_bound")
    assert "num_workers=4" not in data.action and "__getitem__ cheaper" in data.action
    assert "num_workers=0 saves each batch its trip between processes" in data.action
    assert "2 physical cores" in data.evidence and "upper bound" in data.evidence
    assert data.predicted_speedup == pytest.approx(1 / (1 - 4.1 / 10.74), abs=0.01)
    # on 8 cores the same run is told to double its workers
    more = next(v for v in diagnose(r, CTX) if v.id == "input_bound")
    assert "num_workers=4" in more.action


def _dtype_run(dtype: str, arithmetic_ms: float, step_ms: float = 40.0, dev: str = "cpu",
               op_ms: float | None = None) -> WatchResult:
    """A CPU step whose matmuls ran in `dtype` for `arithmetic_ms` of the window's time per step."""
    from trainspeed.watch.result import OpTime

    r = recorded(step_ms, {"forward": 0.2 * step_ms, "backward": 0.7 * step_ms, "optimizer": 0.05 * step_ms},
                 dev=dev, ops=100, flops=170e6)
    rows = [OpTime("aten.mm", dtype, 5, 0.8 * arithmetic_ms, True, 102e6),
            OpTime("aten.addmm", dtype, 3, 0.2 * arithmetic_ms, True, 68e6),
            OpTime("aten.gelu", dtype, 2, 0.5, False, None)]
    return dataclasses.replace(r, op_times=rows, op_ms_per_step=op_ms or arithmetic_ms + 0.5)


def test_slow_dtype_names_bfloat16_matmuls_on_a_cpu_without_native_bfloat16() -> None:
    ctx = dataclasses.replace(CTX, dtype_gflops={"bfloat16": 1.0})
    verdicts = diagnose(_dtype_run("bfloat16", 36.0), ctx)
    assert [v.id for v in verdicts] == ["slow_dtype"]  # not compute_bound, not launch_bound
    v = verdicts[0]
    assert "bfloat16" in v.evidence and "aten.mm x5" in v.evidence and "1.0 GFLOP/s" in v.evidence
    assert "torch.autocast('cpu', dtype=torch.bfloat16)" in v.action
    # 36 ms of matmuls at 1/100 of their time: 40 / (40 - 36 * 0.99)
    assert v.predicted_speedup == pytest.approx(40 / (40 - 36 * 0.99), abs=0.01)


def test_slow_dtype_float64_says_convert_the_numpy_data() -> None:
    ctx = dataclasses.replace(CTX, dtype_gflops={"float64": 45.0})
    v = next(v for v in diagnose(_dtype_run("float64", 30.0), ctx) if v.id == "slow_dtype")
    assert "float64" in v.evidence and "model.float()" in v.action and "astype(np.float32)" in v.action
    assert v.predicted_speedup == pytest.approx(40 / (40 - 30 * 0.55), abs=0.01)


def test_slow_dtype_takes_the_windows_clock_down_to_the_step() -> None:
    # the window's ops add up to 50 ms in a 40 ms step: its 36 ms of matmuls count as 36 * 40 / 50
    ctx = dataclasses.replace(CTX, dtype_gflops={"bfloat16": 1.0})
    v = diagnose(_dtype_run("bfloat16", 36.0, op_ms=50.0), ctx)[0]
    assert v.id == "slow_dtype" and "28.80 ms of the 40.00 ms step" in v.evidence


@pytest.mark.parametrize(("dtype", "gflops", "arithmetic_ms", "dev"), [
    ("bfloat16", 150.0, 36.0, "cpu"),  # a CPU with AMX: bfloat16 faster than float32
    ("bfloat16", 1.0, 6.0, "cpu"),  # a sixth of the step: not worth the attention
    ("float32", 1.0, 36.0, "cpu"),  # float32 is the reference, never slow
    ("bfloat16", None, 36.0, "cpu"),  # the rate was not probed
    ("bfloat16", 1.0, 36.0, "cuda"),  # an op's host time on CUDA is its launch
])
def test_slow_dtype_stays_silent(dtype: str, gflops: float | None, arithmetic_ms: float, dev: str) -> None:
    ctx = dataclasses.replace(CTX, dtype_gflops={dtype: gflops} if gflops else {})
    assert "slow_dtype" not in ids(_dtype_run(dtype, arithmetic_ms, dev=dev), ctx)


def test_slow_dtype_candidates_are_the_dtypes_worth_a_probe() -> None:
    from trainspeed.diagnose.rules import slow_dtype_candidates

    assert slow_dtype_candidates(_dtype_run("bfloat16", 36.0)) == ["bfloat16"]
    assert slow_dtype_candidates(_dtype_run("bfloat16", 6.0)) == []
    assert slow_dtype_candidates(_dtype_run("float32", 36.0)) == []
    assert slow_dtype_candidates(_dtype_run("float64", 36.0, dev="cuda")) == []


def _lstm_run(layer_ms: float, step_ms: float = 141.0, op_ms: float | None = None) -> WatchResult:
    """/tmp's unseen LSTM script as the doctor measured it (2026-11-23, the 2-vCPU VM): 147 ops per step,
    two mkldnn LSTM layers forward and backward doing nearly all the work, and no FLOP formula for them."""
    from trainspeed.watch.result import OpTime

    r = recorded(step_ms, {"forward": 0.37 * step_ms, "backward": 0.57 * step_ms, "optimizer": 0.05 * step_ms},
                 ops=147, flops=4.9e5, batch=64, threads=2)
    rows = [OpTime("aten.mkldnn_rnn_layer_backward", "float32", 2, 0.6 * layer_ms, False, None),
            OpTime("aten.mkldnn_rnn_layer", "float32", 2, 0.4 * layer_ms, False, None),
            OpTime("aten.sqrt", "float32", 10, 0.405, False, None),  # 40 us a call: inside the fixed cost
            OpTime("aten.addmm", "float32", 1, 0.05, True, 3.3e5)]
    return dataclasses.replace(r, op_times=rows, op_ms_per_step=op_ms or layer_ms + 2.8)


def test_work_in_ops_without_a_flop_formula_is_not_per_op_overhead() -> None:
    ctx = Context(dispatch_us=1.7, matmul_gflops=130.0, physical_cores=2, logical_threads=2)
    verdicts = diagnose(_lstm_run(131.0), ctx)
    assert [v.id for v in verdicts] == ["compute_bound"]  # it said launch_bound 10x, "913.6 us" per op
    assert "aten.mkldnn_rnn_layer_backward x2, aten.mkldnn_rnn_layer x2 per step" in verdicts[0].evidence
    assert "aten.sqrt" not in verdicts[0].evidence and "GFLOP need" not in verdicts[0].evidence
    # the layers' work beyond a fixed cost per call, on the median step's clock (the window saw 133.8 ms)
    work = (131.0 - 4 * 30 * 1.7e-3) * min(1.0, 141.0 / 133.8)
    assert f"{work:.2f} ms goes to work" in verdicts[0].evidence


def test_tiny_ops_slow_in_the_window_are_still_per_op_overhead() -> None:
    # the seed's window (2026-11-23): 38 ops, the slowest calls 43 us (addmm) and 24 us, a 3.4 us probe
    from trainspeed.watch.result import OpTime

    r = recorded(0.62, {"forward": 0.18, "backward": 0.24, "optimizer": 0.18, "sync": 0.003}, ops=38, flops=4e4,
                 batch=120, threads=2)
    rows = [OpTime("aten.addmm", "float32", 2, 0.086, True, 2.9e4), OpTime("aten.t", "float32", 9, 0.072, False, None),
            OpTime("aten.sum", "float32", 2, 0.049, False, None), OpTime("aten.ones_like", "float32", 1, 0.0245, False, None)]
    r = dataclasses.replace(r, op_times=rows, op_ms_per_step=0.54)
    ctx = Context(dispatch_us=1.7, matmul_gflops=120.0, physical_cores=2, logical_threads=2)
    assert ids(r, ctx)[0] == "launch_bound"


def test_input_bound_from_workers_started_anew_each_epoch_says_persistent_workers() -> None:
    # /tmp's unseen respawn script (2026-11-23, the 2-vCPU VM): 10 steps an epoch, 2 workers started
    # anew at each of 39 epochs, 51 ms each with the first batch: 41% of the run, of 77% waiting on data
    r = recorded(4.53, {"data": 2.2, "forward": 0.8, "backward": 0.7, "optimizer": 0.3}, flops=1e6, batch=100,
                 loaders=[LoaderInfo(2, False, 100, False)], threads=1, shares={"data": 0.77})
    r = dataclasses.replace(r, loader_starts=39, loader_start_share=0.41, loader_start_ms=50.7)
    ctx = Context(dispatch_us=2.0, matmul_gflops=100.0, physical_cores=2, logical_threads=2)
    data = next(v for v in diagnose(r, ctx) if v.id == "input_bound")
    assert "persistent_workers=True" in data.action and "num_workers=4" not in data.action
    assert "39 starts (one per epoch), 50.7 ms each" in data.evidence
    assert data.predicted_speedup == pytest.approx(1 / (1 - 0.41), abs=0.01)
    # persistent workers already, or starts that are a small part of the wait: the other advice
    for kept in (dataclasses.replace(r, loaders=[LoaderInfo(2, False, 100, True)]),
                 dataclasses.replace(r, loader_start_share=0.1)):
        other = next(v for v in diagnose(kept, ctx) if v.id == "input_bound")
        assert "persistent_workers=True)" not in other.action and "__getitem__ cheaper" in other.action


def _per_sample_run(micro: float) -> WatchResult:
    """/tmp's unseen per-sample script as the doctor measured it (2026-11-23, the 2-vCPU VM): 32 forward and
    backward passes of one sample per optimizer step of a small MLP, 1188 ops, 12.8 ms."""
    r = recorded(12.835, {"forward": 2.874, "backward": 7.189, "optimizer": 0.371}, ops=1188, flops=311296,
                 batch=1, threads=2)
    return dataclasses.replace(r, other_ops_per_step=192, other_op_ms_per_step=3.35, op_ms_per_step=17.63,
                               micro_batches_per_step=micro)


def test_small_micro_batches_accumulated_per_step_are_one_batch_to_merge() -> None:
    ctx = Context(dispatch_us=2.0, matmul_gflops=107.0, physical_cores=2, logical_threads=2)
    verdicts = diagnose(_per_sample_run(32), ctx)
    assert verdicts[0].id == "small_batch"  # was host_code_heavy 1.16x, launch_bound 1.04x on 37 ops
    assert "32 forward and backward passes of a batch of 1" in verdicts[0].evidence
    assert "one batch of 32" in verdicts[0].action and "loss / 32" in verdicts[0].action
    assert verdicts[0].predicted_speedup == 10.0  # 16.7x by the model, at the cap; the merged script ran 22x
    # 4 micro-batches: forward+backward less its arithmetic, and the ops around them, once instead of 4 times
    four = next(v for v in diagnose(_per_sample_run(4), ctx) if v.id == "small_batch")
    passes, arithmetic, around = 2.874 + 7.189, 311296 / 107e9 * 1e3, 2.397
    assert four.predicted_speedup == pytest.approx(12.835 / (12.835 - (passes - arithmetic + around) * 0.75), abs=0.01)
    # one pass per step: the plain advice, no prediction
    one = next(v for v in diagnose(_per_sample_run(1), ctx) if v.id == "small_batch")
    assert "try 4" in one.action and one.predicted_speedup is None


def _anomaly_run(stacks_ms: float) -> WatchResult:
    """/tmp's unseen anomaly script as the doctor measured it (2026-11-23): an MLP trained with
    torch.autograd.set_detect_anomaly(True) left on, 148 ops per step of which 30 are its NaN checks."""
    from trainspeed.watch.result import OpTime

    r = recorded(4.7, {"forward": 2.49, "backward": 1.59, "optimizer": 0.45}, ops=148, flops=3.55e7, batch=256,
                 threads=2)
    rows = [OpTime("aten.mm", "float32", 5, 0.55, True, 2.2e7), OpTime("aten.addmm", "float32", 3, 0.46, True, 1.3e7),
            OpTime("aten._is_any_true", "bool", 15, 0.43, False, None),
            OpTime("aten.isnan", "float32", 15, 0.31, False, None)]
    return dataclasses.replace(r, op_times=rows, op_ms_per_step=3.2, anomaly_ms_per_step=stacks_ms)


def test_anomaly_detection_left_on_is_named_with_its_stacks_and_nan_checks() -> None:
    ctx = Context(dispatch_us=2.0, matmul_gflops=105.0, physical_cores=2, logical_threads=2)
    verdicts = diagnose(_anomaly_run(2.26), ctx)
    assert verdicts[0].id == "anomaly_detection"  # the same run said nothing, or launch_bound 3.7x first
    assert "2.26 ms per step storing a formatted Python stack" in verdicts[0].evidence
    assert "0.74 ms checking every gradient for NaN" in verdicts[0].evidence
    assert "set_detect_anomaly(True)" in verdicts[0].action
    assert verdicts[0].predicted_speedup == pytest.approx(4.7 / (4.7 - 2.26 - 0.74), abs=0.01)
    launch = next((v for v in verdicts if v.id == "launch_bound"), None)
    assert launch is None or "118 ops per step" in launch.evidence  # its checks are not the ops' fixed cost
    # off, or costing little: no verdict
    assert "anomaly_detection" not in ids(_anomaly_run(0.0), ctx)
    quiet = dataclasses.replace(_anomaly_run(0.1), op_times=None)
    assert "anomaly_detection" not in ids(quiet, ctx)


def test_an_iterator_started_every_step_is_told_to_make_it_once() -> None:
    # /tmp's unseen script (2026-11-23): `next(iter(loader))` each step with 2 workers, 94% of the run waiting
    r = recorded(80.8, {"data": 76.0, "forward": 0.7, "backward": 0.7, "optimizer": 0.7}, flops=6e5, batch=64,
                 loaders=[LoaderInfo(2, False, 64, False)], threads=2)
    r = dataclasses.replace(r, loader_starts=94, loader_start_share=0.69, loader_start_ms=53.9)
    ctx = Context(dispatch_us=2.0, matmul_gflops=100.0, physical_cores=2, logical_threads=2)
    data = next(v for v in diagnose(r, ctx) if v.id == "input_bound")
    assert "94 starts in 94 steps" in data.evidence and "one per epoch" not in data.evidence
    assert "make the iterator once" in data.action and "new worker processes" in data.action
    assert data.predicted_speedup == pytest.approx(1 / (1 - 0.69), abs=0.01)
    # without workers: the same advice, no workers to blame
    r0 = dataclasses.replace(r, loaders=[LoaderInfo(0, False, 64, False)])
    data0 = next(v for v in diagnose(r0, ctx) if v.id == "input_bound")
    assert "make the iterator once" in data0.action and "worker" not in data0.action


def _printing_run(dev: str = "cpu") -> WatchResult:
    """/tmp's unseen script (2026-11-23, CPU): `print("step", i, "loss", loss, "logits", out[:2])` every step,
    the two tensors' repr 41% of the step."""
    line = 'print("step", i, "loss", loss, "logits", out[:2])'
    r = recorded(2.35, {"forward": 0.38, "backward": 0.55, "optimizer": 0.27, "sync": 0.98}, ops=38, flops=2.1e7,
                 batch=256, threads=2, dev=dev, busy=0.5 if dev == "cuda" else None)
    return dataclasses.replace(r, sync_sites=[SyncSite("train.py:10", "__repr__", 1600, 992.9, line)],
                               other_sites=[OtherSite("train.py:10", line, 83, 0.83),
                                            OtherSite("train.py:8", "loss = f(out, y)", 17, 0.17)])


def test_tensors_formatted_by_a_logging_line_are_logging_time_on_a_cpu() -> None:
    ctx = Context(dispatch_us=2.0, matmul_gflops=110.0, physical_cores=2, logical_threads=2)
    verdicts = diagnose(_printing_run(), ctx)
    assert verdicts[0].id == "logging_heavy"  # it said nothing: the reads were "syncs" on a CPU
    assert "goes to the tensors logging lines format" in verdicts[0].evidence
    assert "__repr__, 0.62 ms a call" in verdicts[0].evidence and "not tensors" in verdicts[0].action
    other = 2.35 - 0.38 - 0.55 - 0.27 - 0.98
    assert verdicts[0].predicted_speedup == pytest.approx(2.35 / (2.35 - other * 0.83 - 0.98), abs=0.01)
    # on a GPU the same read waits for the device: sync_bound's, not counted here
    cuda = next((v for v in diagnose(_printing_run("cuda"), ctx) if v.id == "logging_heavy"), None)
    assert cuda is None or "tensors logging lines format" not in cuda.evidence


def _adamw_run(fused: bool | None = None, opt_ms: float = 11.95) -> WatchResult:
    """/tmp's unseen script (2026-11-23, CPU): 40 small Linear+LayerNorm blocks under AdamW(foreach=False),
    162 parameter tensors updated one at a time, the optimizer half of a 23.9 ms step."""
    from trainspeed.watch.result import OptimizerInfo

    r = recorded(23.87, {"forward": 4.6, "backward": 5.6, "optimizer": opt_ms}, ops=2445, flops=1.56e7, batch=64,
                 threads=2)
    return dataclasses.replace(r, optimizer=OptimizerInfo("AdamW", 162, 44932, False, fused))


def test_an_optimizer_stepping_tensors_one_at_a_time_is_told_to_fuse() -> None:
    ctx = Context(dispatch_us=2.0, matmul_gflops=110.0, physical_cores=2, logical_threads=2, optimizer_ms=(7.42, 1.40))
    verdict = next(v for v in diagnose(_adamw_run(), ctx) if v.id == "optimizer_heavy")
    assert "AdamW updates 162 parameter tensors (foreach=False)" in verdict.evidence
    assert "7.42 ms as configured and 1.40 ms with fused=True" in verdict.evidence
    assert "AdamW(..., fused=True)" in verdict.action
    # the phase at the probe's ratio; measured: 21.6-24.0 ms steps against 12.5-15.7 ms fused (1.4x-1.9x)
    assert verdict.predicted_speedup == pytest.approx(23.87 / (23.87 - 11.95 * (1 - 1.40 / 7.42)), abs=0.01)
    # fused already, not probed (no fused kernel), or a small optimizer phase: nothing
    from trainspeed.diagnose.rules import optimizer_candidate

    assert "optimizer_heavy" not in ids(_adamw_run(fused=True), ctx) and not optimizer_candidate(_adamw_run(fused=True))
    assert "optimizer_heavy" not in ids(_adamw_run(), dataclasses.replace(ctx, optimizer_ms=None))
    assert not optimizer_candidate(_adamw_run(opt_ms=2.0))


def _one_at_a_time_run(calls: float, chained: float = 0.0, batch: int = 1) -> WatchResult:
    """/tmp's unseen per-sample-forward script as the doctor measured it (2026-11-23, the 2-vCPU VM): an MLP
    called on each of a batch's 64 rows, one backward per step, 1804 ops in an 8.2 ms step."""
    r = recorded(8.193, {"forward": 3.309, "backward": 3.962, "optimizer": 0.414}, ops=1804, flops=1.245e6,
                 batch=batch, threads=2)
    return dataclasses.replace(r, other_ops_per_step=68, other_op_ms_per_step=0.72, op_ms_per_step=8.9,
                               micro_batches_per_step=1.0, model_calls_per_step=calls, model_calls_chained=chained)


def test_a_model_fed_one_sample_at_a_time_is_told_to_call_it_once_on_the_batch() -> None:
    ctx = Context(dispatch_us=1.87, matmul_gflops=118.0, physical_cores=2, logical_threads=2)
    verdicts = diagnose(_one_at_a_time_run(64), ctx)
    assert verdicts[0].id == "small_batch"  # was launch_bound 1.28x first, and "raise the batch size (try 4)"
    assert "called 64 times per step on a batch of 1" in verdicts[0].evidence
    assert "call the model once" in verdicts[0].action and "try 4" not in verdicts[0].action
    # forward+backward less their arithmetic, and the ops around them, once instead of 64 times: past the cap
    # (the script calling model(X) once measured 16.5x, pair by pair in one process)
    passes, arithmetic = 3.309 + 3.962, 1.245e6 / 118e9 * 1e3
    assert (passes - arithmetic + 0.508) * 63 / 64 > 8.193 * 0.9
    assert verdicts[0].predicted_speedup == 10.0
    # a cell stepped by hand over a sequence (each call given the last one's output): no merge to predict
    rnn = next(v for v in diagnose(_one_at_a_time_run(12, chained=11), ctx) if v.id == "small_batch")
    assert "recurrent cell" in rnn.evidence and "nn.LSTM" in rnn.action and rnn.predicted_speedup is None
    # an agent acting on the action it read after each call (REINFORCE): the calls cannot be stacked
    agent = next(v for v in diagnose(dataclasses.replace(_one_at_a_time_run(74), model_calls_after_read=73.0), ctx)
                 if v.id == "small_batch")
    assert "vectorised environment" in agent.action and "torch.no_grad()" in agent.action
    assert "73 of them" in agent.evidence and agent.predicted_speedup is None
    # several calls on real batches (two views of a contrastive step): the plain advice
    two = next(v for v in diagnose(_one_at_a_time_run(2, batch=64), ctx) if v.id == "small_batch")
    assert "try 256" in two.action and two.predicted_speedup is None


def _rebuilt_run(built: int) -> WatchResult:
    """/tmp's unseen script (2026-11-23, CPU): a new Adam built inside the loop on every step of a small MLP."""
    from trainspeed.watch.result import OptimizerInfo

    r = recorded(1.24, {"forward": 0.2, "backward": 0.33, "optimizer": 0.58, "sync": 0.01}, ops=81, flops=9.96e6,
                 batch=512, threads=2)
    return dataclasses.replace(r, optimizer=OptimizerInfo("Adam", 4, 4740, None, None), optimizers_built=built,
                               optimizer_build_ms=0.064)


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


def test_ops_as_cheap_as_a_bare_dispatch_leave_no_per_op_overhead_to_save() -> None:
    # an LBFGS step (2026-11-23, CPU): 1480 tiny ops at 1.9 us each, under the 2.0 us probe; launch_bound
    # predicted 0.99x and 0.54x
    r = recorded(2.82, {"forward": 0.3, "backward": 0.33, "optimizer": 2.17}, ops=1480, flops=11.47e6, batch=512)
    assert "launch_bound" not in ids(r)


def test_input_bound_says_more_workers_than_cores() -> None:
    r = recorded(3.88, {"data": 2.25, "forward": 0.6, "backward": 0.6, "optimizer": 0.2}, flops=1.25e6, batch=32,
                 loaders=[LoaderInfo(8, False, 32, False)], threads=2)
    ctx = Context(dispatch_us=2.0, matmul_gflops=100.0, physical_cores=2, logical_threads=2)
    data = next(v for v in diagnose(r, ctx) if v.id == "input_bound")
    assert "num_workers=8, more than this machine's 2 physical cores" in data.evidence


def _ema_run(sites: list[OtherSite]) -> WatchResult:
    """/tmp's unseen EMA script (2026-11-23, CPU): `copy.deepcopy(model)` every step and a weight average
    by hand, 30% of the run outside forward, backward and the optimizer, 27 torch ops there."""
    r = recorded(3.97, {"forward": 0.866, "backward": 1.641, "optimizer": 0.398}, ops=79, flops=2.22e8, batch=128,
                 threads=2, shares={"forward": 0.212, "backward": 0.397, "optimizer": 0.095})
    return dataclasses.replace(r, other_sites=sites, other_ops_per_step=27, other_op_ms_per_step=0.66, op_ms_per_step=3.7)


def test_torch_work_outside_the_phases_on_every_step_is_named_by_its_line_without_a_prediction() -> None:
    ctx = Context(dispatch_us=1.8, matmul_gflops=116.0, physical_cores=2, logical_threads=2)
    copy = OtherSite("ema.py:10", "prev = copy.deepcopy(model)  # a snapshot every step", 20, 0.77)
    avg = OtherSite("ema.py:13", "pe.mul_(0.99).add_(p, alpha=0.01)", 4, 0.15)
    loss = OtherSite("ema.py:8", "loss = nn.functional.cross_entropy(model(X), y)", 2, 0.08)
    verdicts = diagnose(_ema_run([copy, avg, loss]), ctx)
    outside = next(v for v in verdicts if v.id == "outside_work")  # was "none" or compute_bound alone
    assert "ema.py:10" in outside.evidence and "30% of the run's time" in outside.evidence
    assert "run it every N steps" in outside.action and outside.predicted_speedup is None
    assert "host_code_heavy" not in [v.id for v in verdicts]  # torch's ops there explain the time
    # a loss computed outside the model is the step's own work, and a logging line logging_heavy's
    assert "outside_work" not in ids(_ema_run([dataclasses.replace(loss, share_of_other=0.9)]), ctx)
    assert "outside_work" not in ids(_ema_run([OtherSite("ema.py:20", "print(step, loss.item())", 20, 0.9)]), ctx)
    # too little of the run outside the phases
    small = dataclasses.replace(_ema_run([copy]), phases={**_ema_run([copy]).phases,
                                "other": PhaseStat(0.4, None, 0.1)})
    assert "outside_work" not in ids(small, ctx)


# /tmp's unseen TensorDataset script and examples/tensor_dataset_loader.py (2026-11-23, 2-vCPU VM): a DataLoader
# batching a TensorDataset row by row; a worker's handover of its batches measured 1.7 ms, 0.8 ms of it in the
# training process, and the batch taken whole 0.15 ms
TWO_CORES = Context(dispatch_us=2.0, matmul_gflops=100.0, physical_cores=2, logical_threads=2,
                    handover=Handover(wall_ms=1.7, main_ms=0.8), batched_ms=0.15)


def _loader_run(step_ms: float, data_ms: float, loader: LoaderInfo, mean_ms: float | None = None) -> WatchResult:
    r = recorded(step_ms, {"data": data_ms, "forward": 0.2 * (step_ms - data_ms), "backward": 0.4 * (step_ms - data_ms),
                           "optimizer": 0.3 * (step_ms - data_ms)}, flops=2e6, batch=loader.batch_size,
                 loaders=[loader], threads=2)
    return dataclasses.replace(r, mean_ms=mean_ms or step_ms)


def test_input_bound_on_a_tensor_dataset_fetched_row_by_row_says_take_each_batch_whole() -> None:
    rows = LoaderInfo(0, False, 64, False, dataset="TensorDataset", item_by_item=True, batchable=True, batches=620)
    r = _loader_run(0.9, 0.37, rows, mean_ms=0.95)
    data = next(v for v in diagnose(r, TWO_CORES) if v.id == "input_bound")
    assert "BatchSampler(RandomSampler(dataset), 64" in data.action and "num_workers=2" not in data.action
    assert "one by one" in data.evidence and "0.15 ms" in data.evidence
    # the run's mean step less its mean wait, plus the batch taken whole
    wait = 0.37 / 0.9 * 0.95
    assert data.predicted_speedup == pytest.approx(0.95 / (0.95 - wait + 0.15), abs=0.01)
    # with workers already there, the same fix drops them
    workers = dataclasses.replace(r, loaders=[dataclasses.replace(rows, num_workers=2)])
    assert "num_workers=0" in next(v for v in diagnose(workers, TWO_CORES) if v.id == "input_bound").action
    # not probed (a script that kept no batch to copy): the worker advice as before, no batch taken whole
    assert "BatchSampler" not in next(v for v in diagnose(r, CTX) if v.id == "input_bound").action


def test_input_bound_names_the_scripts_own_collate_fn_among_what_to_make_cheaper() -> None:
    # nlp_collate.py (scratch, 2026-11-23): texts split and mapped to ids in a collate_fn, every batch of every epoch
    texts = LoaderInfo(0, False, 64, False, dataset="Texts", item_by_item=True, batches=250, collate="collate")
    r = _loader_run(6.0, 2.1, texts)
    data = next(v for v in diagnose(r, CTX) if v.id == "input_bound")
    assert "make __getitem__ or the collate_fn `collate` cheaper (precompute: tokenize or decode once" in data.action
    plain = next(v for v in diagnose(_loader_run(6.0, 2.1, dataclasses.replace(texts, collate=None)), CTX)
                 if v.id == "input_bound")
    assert "make __getitem__ cheaper (precompute, cache)" in plain.action


def test_input_bound_advises_no_workers_whose_handover_costs_more_than_making_the_batch() -> None:
    # a custom Dataset returning x[i], y[i]: 0.28 ms of a 0.78 ms step waiting, each batch 0.29 ms to make here;
    # on this VM 2 workers ran the same loop 2.7x slower
    custom = LoaderInfo(0, False, 64, False, dataset="Mem", item_by_item=True, batches=900)
    r = _loader_run(0.78, 0.28, custom)
    data = next(v for v in diagnose(r, TWO_CORES) if v.id == "input_bound")
    assert "num_workers=" not in data.action and "hands __getitem__ the batch's list of indices" in data.action
    assert "1.70 ms to hand over" in data.evidence and "would not make the run faster" in data.evidence
    assert data.predicted_speedup == pytest.approx(1 / (1 - 0.28 / 0.78), abs=0.01)
    # a TensorDataset whose batches are already taken whole: only the DataLoader's own Python is left
    whole = dataclasses.replace(custom, dataset="TensorDataset", item_by_item=False)
    direct = next(v for v in diagnose(dataclasses.replace(r, loaders=[whole]), TWO_CORES) if v.id == "input_bound")
    assert "x[perm[i:i + 64]]" in direct.action and "num_workers=" not in direct.action


def test_input_bound_with_heavy_items_advises_workers_and_cores_for_them() -> None:
    # examples/slow_dataloader.py: 16.2 ms of a 20.8 ms step making the batch; workers=2 with torch's 2 threads
    # ran no faster on this VM, with torch.set_num_threads(1) 1.5x faster
    heavy = LoaderInfo(0, False, 32, False, dataset="AugmentedImages", item_by_item=True, batches=129)
    r = _loader_run(20.8, 16.224, heavy)
    ctx = dataclasses.replace(TWO_CORES, handover=Handover(wall_ms=2.5, main_ms=1.08))
    data = next(v for v in diagnose(r, ctx) if v.id == "input_bound")
    assert "num_workers=2" in data.action and "torch.set_num_threads(1)" in data.action
    assert "upper bound" in data.evidence
    # the longest of: the step with the handover, each worker's turn, all the work over the 2 cores
    share, hand, main = 16.224 / 20.8, 2.5 / 20.8, 1.08 / 20.8
    new = max(1 - share + main, (share + hand) / 2, (1 + main + hand) / 2)
    assert data.predicted_speedup == pytest.approx(1 / new, abs=0.01)
    # on 8 cores and 2 torch threads the workers get cores of their own: no thread advice
    wide = dataclasses.replace(ctx, physical_cores=8, logical_threads=16)
    assert "set_num_threads" not in next(v for v in diagnose(r, wide) if v.id == "input_bound").action


def test_evaluation_heavy_from_a_large_share_of_the_run_in_evaluation() -> None:
    # examples/eval_too_often.py (2026-11-23, CPU): 19 evaluations of 142.5 ms, one every 50 steps, 43% of the run
    r = recorded(3.76, {"forward": 1.3, "backward": 1.6, "optimizer": 0.27}, flops=2.7e8, batch=512, threads=2)
    heavy = dataclasses.replace(r, evaluation=Evaluation(count=19, mean_ms=142.5, share=0.43, every_steps=50.0))
    verdict = diagnose(heavy, CTX)[0]
    assert verdict.id == "evaluation_heavy"
    assert "43%" in verdict.evidence and "one every 50 steps" in verdict.evidence
    assert "every 200 steps" in verdict.action and "inference_mode" in verdict.action
    assert verdict.predicted_speedup == pytest.approx(1 / (1 - 0.43 * 3 / 4), abs=0.01)
    # one evaluation a tenth of the run: not worth a verdict
    light = dataclasses.replace(r, evaluation=Evaluation(count=1, mean_ms=40.0, share=0.1, every_steps=None))
    assert "evaluation_heavy" not in ids(light)
