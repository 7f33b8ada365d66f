"""launch_bound, small_batch, cpu_faster and sync_bound on recorded measurements: GPU runs judged without a GPU."""

from __future__ import annotations

import dataclasses

import pytest
from recorded_runs import CTX, ids, recorded, with_load

from trainspeed.diagnose.rules import Context, diagnose
from trainspeed.watch.result import GpuUtil, WatchResult
from trainspeed.watch.sites import OtherSite


def test_sync_bound_on_gpu_predicts_host_and_device_overlapping() -> None:
    # host: 1 ms of launches + 4 ms waiting in .item(); device busy 3 ms of the 5 ms step
    r = recorded(5.0, {"forward": 0.4, "backward": 0.4, "optimizer": 0.2, "sync": 4.0},
                 {"forward": 1.2, "backward": 1.5, "optimizer": 0.3}, dev="cuda", ops=60, flops=1e8, syncs=1.0,
                 busy=3.0)
    verdicts = diagnose(r, CTX)
    sync = next(v for v in verdicts if v.id == "sync_bound")
    assert "train.py:42" in sync.evidence and sync.site == "train.py:42"
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
    compiled = diagnose(dataclasses.replace(r, window=dataclasses.replace(r.window, compiled=True)), CTX)[0]
    assert compiled.id == "launch_bound" and compiled.action.startswith("the model is compiled already")
    assert compiled.predicted_speedup == found[0].predicted_speedup


def test_cpu_launch_bound_counts_only_the_ops_of_forward_backward_and_the_optimizer() -> None:
    # examples/tensor_dataset_loader.py with a batch of 64 (2026-11-23): 168 ops per step, 131 of them the
    # DataLoader's row-by-row indexing and collation and 3 in "other"; counted as the compute's, they took the
    # bare dispatches of 131 ops off its per-op overhead, and the per-op figure came out at a third
    r = recorded(0.84, {"data": 0.35, "forward": 0.11, "backward": 0.19, "optimizer": 0.14}, ops=168, flops=2e6,
                 threads=2)
    r = dataclasses.replace(r, window=dataclasses.replace(r.window, edge_ops_per_step=131.0, other_ops_per_step=3.0,
                                                          other_op_ms_per_step=0.01))
    launch = next(v for v in diagnose(r, CTX) if v.id == "launch_bound")
    assert launch.evidence.startswith("34 ops per step in forward, backward and the optimizer average 12.9 us each")
    overhead = 0.44 - (2e6 / 100e9 * 1e3 + 34 * 2.0 / 1e3)
    assert launch.predicted_speedup == pytest.approx(0.84 / (0.84 - overhead), abs=0.01)
    counted = next(v for v in diagnose(dataclasses.replace(r, window=dataclasses.replace(r.window, edge_ops_per_step=None, other_ops_per_step=None)), CTX)
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
    r = dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=[log]))
    fast = Context(dispatch_us=1.62, matmul_gflops=120.0, physical_cores=2, logical_threads=2)
    assert 71.04e6 / 120e9 * 1e3 / 2.5 < 0.25
    assert ids(r, fast) == ["logging_heavy"]
    # with the slowest dispatch probe and a fast matmul probe seen on that VM (3.7 us, 119 GFLOP/s)
    # each op still carries over two dispatches of arithmetic (1 420 / (119 x 3.7) = 3.2)
    slow_dispatch = Context(dispatch_us=3.7, matmul_gflops=119.0, physical_cores=2, logical_threads=2)
    assert ids(r, slow_dispatch) == ["logging_heavy"]
    # the same step time made of tiny ops is per-op overhead
    tiny = dataclasses.replace(r, window=dataclasses.replace(r.window, flops_per_step=4e4))
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


def test_matrix_products_keep_their_measured_time_in_the_predicted_step() -> None:
    # examples/realistic/tabular_mlp.py --epochs 30 (2026-11-26, Zen 4): its 256 x 56 x 128 products ran at 76 to
    # 91 GFLOP/s in the profiler window where the probe's reached 197; trainspeed's replay of the step (fused
    # Adam) took 310 us against the FLOP model's 254 us floor
    from trainspeed.watch.result import OpTime

    r = recorded(0.71, {"forward": 0.1465, "backward": 0.2484, "optimizer": 0.2911}, ops=106, flops=20.12e6,
                 batch=256, threads=2)
    rows = [OpTime("aten.mm", "float32", 5, 0.1336, True, 12.19e6), OpTime("aten.addmm", "float32", 3, 0.1041, True, 7.93e6),
            OpTime("aten.add_", "float32", 12, 0.0739, False, None), OpTime("aten.t", "float32", 14, 0.0353, False, None)]
    r = dataclasses.replace(r, window=dataclasses.replace(r.window, edge_ops_per_step=7.0, other_ops_per_step=5.0,
                                                          other_op_ms_per_step=0.03, op_times=rows, op_ms_per_step=0.70))
    ctx = Context(dispatch_us=1.154, matmul_gflops=197.3, physical_cores=2, logical_threads=2)
    launch = diagnose(r, ctx)[0]
    assert launch.id == "launch_bound"
    assert "the 8 with real arithmetic (matrix products, convolutions) took 238 us in the profiler window" in launch.evidence
    compute = 0.1465 + 0.2484 + 0.2911  # forward, backward and optimizer fill the step beside its "other"
    floor = 0.1336 + 0.1041 + (94 - 8) * 1.154e-3
    assert launch.predicted_speedup == pytest.approx(0.71 / (0.71 - (compute - floor)), abs=0.01)
    # the FLOP model alone, where the window's op times are missing, promises more
    flop_model = diagnose(dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=None)), ctx)[0]
    assert flop_model.predicted_speedup == pytest.approx(0.71 / (0.71 - (compute - 20.12e6 / 197.3e9 * 1e3 - 94 * 1.154e-3)),
                                                         abs=0.01)
    assert flop_model.predicted_speedup > launch.predicted_speedup + 0.5
    # products too small to run at any rate keep the FLOP model (their window time is fixed cost)
    tiny = [dataclasses.replace(row, flops=row.flops / 1000) if row.flops else row for row in rows]
    small = diagnose(dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=tiny,
                                                                       flops_per_step=20.12e3)), ctx)[0]
    assert "with real arithmetic" not in small.evidence


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
    return dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=rows,
                                                             op_ms_per_step=op_ms or layer_ms + 2.8))


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
    r = dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=rows, op_ms_per_step=0.54))
    ctx = Context(dispatch_us=1.7, matmul_gflops=120.0, physical_cores=2, logical_threads=2)
    assert ids(r, ctx)[0] == "launch_bound"


def _per_sample_run(micro: float) -> WatchResult:
    """/tmp's unseen per-sample script as the doctor measured it (2026-11-23, the 2-vCPU VM): 32 forward and
    backward passes of one sample per optimizer step of a small MLP, 1188 ops, 12.8 ms."""
    r = recorded(12.835, {"forward": 2.874, "backward": 7.189, "optimizer": 0.371}, ops=1188, flops=311296,
                 batch=1, threads=2)
    return dataclasses.replace(r, window=dataclasses.replace(r.window, other_ops_per_step=192,
                                                             other_op_ms_per_step=3.35, op_ms_per_step=17.63), steps=dataclasses.replace(r.steps, micro_batches_per_step=micro))


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


def _one_at_a_time_run(calls: float, chained: float = 0.0, batch: int = 1) -> WatchResult:
    """/tmp's unseen per-sample-forward script as the doctor measured it (2026-11-23, the 2-vCPU VM): an MLP
    called on each of a batch's 64 rows, one backward per step, 1804 ops in an 8.2 ms step."""
    r = recorded(8.193, {"forward": 3.309, "backward": 3.962, "optimizer": 0.414}, ops=1804, flops=1.245e6,
                 batch=batch, threads=2)
    return dataclasses.replace(r, window=dataclasses.replace(r.window, other_ops_per_step=68,
                                                             other_op_ms_per_step=0.72, op_ms_per_step=8.9), steps=dataclasses.replace(r.steps, micro_batches_per_step=1.0, model_calls_per_step=calls, model_calls_chained=chained))


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
    acting = _one_at_a_time_run(74)
    acting = dataclasses.replace(acting, steps=dataclasses.replace(acting.steps, model_calls_after_read=73.0))
    agent = next(v for v in diagnose(acting, ctx) if v.id == "small_batch")
    assert "vectorised environment" in agent.action and "torch.no_grad()" in agent.action
    assert "73 of them" in agent.evidence and agent.predicted_speedup is None
    # several calls on real batches (two views of a contrastive step): the plain advice
    two = next(v for v in diagnose(_one_at_a_time_run(2, batch=64), ctx) if v.id == "small_batch")
    assert "try 256" in two.action and two.predicted_speedup is None


def test_ops_as_cheap_as_a_bare_dispatch_leave_no_per_op_overhead_to_save() -> None:
    # an LBFGS step (2026-11-23, CPU): 1480 tiny ops at 1.9 us each, under the 2.0 us probe; launch_bound
    # predicted 0.99x and 0.54x
    r = recorded(2.82, {"forward": 0.3, "backward": 0.33, "optimizer": 2.17}, ops=1480, flops=11.47e6, batch=512)
    assert "launch_bound" not in ids(r)


def test_a_recurrent_cell_stepped_in_python_is_told_its_fused_layer_with_a_measured_prediction() -> None:
    """examples/realistic/sequence_cells.py (2026-11-27): an nn.LSTMCell called 24 times a step; over the run's
    shapes the loop took 4.43 ms forward and backward and nn.LSTM 1.50 ms. The per-op bound undercounts what the
    fused layer saves (it does the sequence's arithmetic in one op): the prediction is the measured saving."""
    from trainspeed.watch.cells import CellLoop

    r = recorded(4.86, {"forward": 1.9, "backward": 2.3, "optimizer": 0.4}, ops=1430, flops=8.7e7, batch=32)
    plain = diagnose(r, CTX)[0]
    assert plain.id == "launch_bound" and "upper bound" in plain.evidence
    loop = CellLoop("LSTMCell", 16, 64, True, None, calls_per_step=24.0)
    cells = dataclasses.replace(r, model=dataclasses.replace(r.model, cell_loop=loop),
                                steps=dataclasses.replace(r.steps, model_calls_per_step=1.0))
    v = diagnose(cells, dataclasses.replace(CTX, cell_ms=(4.43, 1.50)))[0]
    assert v.id == "launch_bound"
    assert v.action.startswith("run the sequence through nn.LSTM(16, 64, batch_first=True) in one call instead of "
                               "the nn.LSTMCell loop")
    assert ("an nn.LSTMCell(16, 64) runs 24 times a step in a Python loop: over 24 time steps on a batch of 32, "
            "forward and backward, that loop took 4.43 ms and nn.LSTM(16, 64, batch_first=True) over the same "
            "sequence 1.50 ms (measured after the run)") in v.evidence
    # the loop's time in the run (at most its forward and backward, 4.2 ms) at the probe's ratio of the two
    assert v.predicted_speedup == pytest.approx(4.86 / (4.86 - 4.2 * (1 - 1.50 / 4.43)), abs=0.01)
    slow_probe = diagnose(cells, dataclasses.replace(CTX, cell_ms=(8.86, 3.00)))[0]  # the same ratio, read slower
    assert slow_probe.predicted_speedup == pytest.approx(v.predicted_speedup, abs=0.02)
    # a fused layer that saves under 5% of the step (float64 on a CPU: 146 ms against two stacked cells' 135 ms) is
    # not advised: the per-op bound stands, its fix not the layer's, and the evidence says why
    same = diagnose(cells, dataclasses.replace(CTX, cell_ms=(1.60, 1.50)))[0]
    assert same.predicted_speedup == plain.predicted_speedup and "upper bound" in same.evidence
    assert not same.action.startswith("run the sequence") and not same.fix.startswith("nn.LSTM")
    assert "the fused layer would save under 5% of the step here" in same.evidence
    assert not plain.fix.startswith("nn.LSTM")
    # an LBFGS step (its closure runs the model): trainspeed.fit steps an optimizer without a closure, and is not told
    from trainspeed.watch.result import OptimizerInfo

    lbfgs = dataclasses.replace(r, optimizers=dataclasses.replace(r.optimizers, info=OptimizerInfo(
        "LBFGS", 6, 13_000, None, None)))
    closure = next(v for v in diagnose(lbfgs, CTX) if v.id == "launch_bound")
    assert "trainspeed.fit does not take LBFGS's closure" in closure.action
    assert closure.fix == "a larger batch (LBFGS's closure is not trainspeed.fit's shape)"
    # and no prediction: no setting reaches the per-op bound (an LBFGS sine-wave model's 1.69x stood first where its
    # float64, 1.22x predicted, measured 1.36x)
    assert closure.predicted_speedup is None and closure.unpredicted is not None
    assert "LBFGS's closure is not trainspeed.fit's shape" in closure.unpredicted
    # a saving under the per-op bound but a real one: the fix is the layer, and the prediction its measured saving (the
    # bound was a promise the layer alone does not keep); the bound is evidence
    bounded = diagnose(cells, dataclasses.replace(CTX, cell_ms=(1.60, 1.20)))[0]
    assert bounded.fix == "self.rnn = nn.LSTM(16, 64, batch_first=True); out, state = self.rnn(x)"
    assert bounded.predicted_speedup == pytest.approx(4.86 / (4.86 - 1.60 * (1 - 1.20 / 1.60)), abs=0.01)
    assert bounded.predicted_speedup < plain.predicted_speedup and "would save at most" in bounded.evidence
    # two stacked float64 cells: told as such, the layer with num_layers=2, the probe's dtype said
    stacked = dataclasses.replace(cells, model=dataclasses.replace(cells.model, cell_loop=dataclasses.replace(
        loop, layers=2, dtype="float64")))
    two = diagnose(stacked, dataclasses.replace(CTX, cell_ms=(4.43, 1.50)))[0]
    assert two.title == "2 stacked nn.LSTMCells stepped in a Python loop"
    assert two.fix == "self.rnn = nn.LSTM(16, 64, num_layers=2, batch_first=True); out, state = self.rnn(x)"
    assert ("2 stacked nn.LSTMCells (16, 64), then (64, 64) run 24 times a step in a Python loop" in two.evidence
            and "(measured after the run, in float64)" in two.evidence)
    # beside busy processes: the probe on one thread's CPU time (the same readings), the phases less their waits left
    # ten times alone's (a heavy load's spinning threads, 2026-11-28): the loop's part of the run is its share of
    # the ops (59 a call, 24 calls: 1416 of 1430), and the prediction stays near alone's, where the probe's 4.43 ms
    # against a 48.6 ms step said 1.06x
    loaded = recorded(48.6, {"forward": 19.0, "backward": 23.0, "optimizer": 4.0}, ops=1430, flops=8.7e7, batch=32)
    loaded = with_load(dataclasses.replace(loaded, model=dataclasses.replace(loaded.model, cell_loop=loop),
                                           steps=dataclasses.replace(loaded.steps, model_calls_per_step=1.0)),
                       others_cpu_cores=1.0)
    busy = next(x for x in diagnose(loaded, dataclasses.replace(CTX, cell_ms=(4.43, 1.50), cell_ops=59))
                if x.id == "launch_bound")
    in_run = 46.0 * 1416 / 1430
    assert busy.predicted_speedup == pytest.approx(48.6 / (48.6 - in_run * (1 - 1.50 / 4.43)), abs=0.01)
    assert busy.predicted_speedup == pytest.approx(v.predicted_speedup, rel=0.2)
    assert f"1416 of the 1430 in forward, backward and the optimizer, {in_run:.2f} ms of their 46.00 ms" in \
        busy.evidence
    # alone the op count changes nothing
    assert diagnose(cells, dataclasses.replace(CTX, cell_ms=(4.43, 1.50), cell_ops=59))[0] == v
    # a GRUCell with relu-free defaults and an RNNCell with relu are told their own layers
    rnn = CellLoop("RNNCell", 8, 32, False, "relu", calls_per_step=10.0)
    assert rnn.layer() == "nn.RNN(8, 32, batch_first=True, bias=False, nonlinearity='relu')"
    assert CellLoop("GRUCell", 8, 32, True, None).layer() == "nn.GRU(8, 32, batch_first=True)"
