"""slow_dtype and compute_bound on recorded measurements: GPU runs judged without a GPU."""

from __future__ import annotations

import dataclasses

import pytest
from recorded_runs import CTX, ids, recorded, with_load

from trainspeed.diagnose.rules import diagnose
from trainspeed.diagnose.rules.step_model import flop_rate
from trainspeed.hardware.gpu import GpuPeak
from trainspeed.watch.result import WatchResult


def test_big_matmuls_on_cpu_are_compute_bound() -> None:
    # 10 GFLOP at 100 GFLOP/s is 100 ms of a 110 ms step
    r = recorded(110.0, {"forward": 40.0, "backward": 65.0, "optimizer": 2.0}, ops=30, flops=1e10)
    assert ids(r) == ["compute_bound"]
    assert "(93% of 107.00 ms)" in diagnose(r, CTX)[0].evidence
    # the probe after the run slower than the run itself (8 threads on 2 cores gave 50 GFLOP/s, the run 77):
    # the arithmetic's need outgrows the time it took, and the evidence says so rather than "162%"
    slow = diagnose(r, dataclasses.replace(CTX, matmul_gflops=60.0))[0]
    assert slow.id == "compute_bound" and "more than their 107.00 ms" in slow.evidence and "%)" not in slow.evidence


def test_beside_busy_processes_a_step_of_few_ops_does_real_work() -> None:
    """Beside busy processes the matmul probe less its waits reads up to twice alone's rate, and the arithmetic's share
    a fraction of alone's (wide_mlp.py 50% against 96%, word_lm.py 16%, 2026-12-02): there a step whose ops' fixed
    cost is under half of its compute does real work; alone the arithmetic's share stays the measure."""
    r = recorded(110.0, {"forward": 40.0, "backward": 65.0, "optimizer": 2.0}, ops=30, flops=1e10)
    quarter = dataclasses.replace(CTX, matmul_gflops=4 * CTX.matmul_gflops)  # 10 GFLOP in 25 ms of 107 ms: 23%
    assert ids(r, quarter) == []
    v = diagnose(with_load(r, others_cpu_cores=1.4), quarter)[-1]
    assert v.id == "compute_bound" and "its 30 ops a step cost at most 1.80 ms of fixed cost" in v.evidence
    assert v.brief.endswith("30 ops doing real work")
    many = recorded(110.0, {"forward": 40.0, "backward": 65.0, "optimizer": 2.0}, ops=3000, flops=1e10)
    # 3 000 ops at 30 dispatches of 2 us: 180 ms, more than the step's compute: not said to do real work
    assert "compute_bound" not in [v.id for v in diagnose(with_load(many, others_cpu_cores=1.4), quarter)]


def test_busy_gpu_is_compute_bound() -> None:
    r = recorded(50.0, {"forward": 15.0, "backward": 30.0, "optimizer": 3.0},
                 {"forward": 15.0, "backward": 30.0, "optimizer": 3.0}, dev="cuda", ops=300, flops=5e12, busy=46.0)
    assert ids(r) == ["compute_bound"]
    assert "TFLOP/s" not in diagnose(r, CTX)[0].evidence  # no peak known: no utilisation claimed
    # 5 TFLOP a 50 ms step is 100 TFLOP/s: 10% of a 989.5 TFLOP/s bf16 peak
    peak = GpuPeak("H100 SXM", "bf16/fp16", 989.5)
    v = diagnose(r, dataclasses.replace(CTX, gpu_peak=peak))[0]
    assert ("5000.0 GFLOP per step (torch.profiler's FLOP formulas) run at 100.0 TFLOP/s, 10% of the H100 SXM's "
            "989.5 TFLOP/s bf16/fp16 peak (model-FLOP utilisation") in v.evidence
    rate = flop_rate(r, dataclasses.replace(CTX, gpu_peak=peak))
    assert rate is not None and rate.tflops == pytest.approx(100.0) and rate.share == pytest.approx(100 / 989.5)
    cpu = recorded(110.0, {"forward": 40.0, "backward": 65.0, "optimizer": 2.0}, ops=30, flops=1e10)
    assert flop_rate(cpu, dataclasses.replace(CTX, gpu_peak=peak)) is None  # a CPU run has no GPU peak
    assert v.lever is None  # half precision already
    # float32 with torch's default precision on a GPU with TF32 tensor cores: TF32 is the lever
    fp32 = diagnose(r, dataclasses.replace(CTX, gpu_peak=GpuPeak("H100 SXM", "fp32", 67, tf32_tflops=494.5)))[0]
    assert fp32.lever is not None and fp32.lever.settings == {"float32_matmul_precision": "high"}
    assert 'torch.set_float32_matmul_precision("high")' in fp32.action and "494.5 TFLOP/s against 67" in fp32.action
    assert diagnose(r, dataclasses.replace(CTX, gpu_peak=GpuPeak("V100 SXM2", "fp32", 15.7)))[0].lever is None


def _dtype_run(dtype: str, arithmetic_ms: float, step_ms: float = 40.0, dev: str = "cpu",
               op_ms: float | None = None) -> WatchResult:
    """A CPU step whose matmuls ran in `dtype` for `arithmetic_ms` of the window's time per step."""
    from trainspeed.watch.result import OpTime

    r = recorded(step_ms, {"forward": 0.2 * step_ms, "backward": 0.7 * step_ms, "optimizer": 0.05 * step_ms},
                 dev=dev, ops=100, flops=170e6)
    rows = [OpTime("aten.mm", dtype, 5, 0.8 * arithmetic_ms, True, 102e6),
            OpTime("aten.addmm", dtype, 3, 0.2 * arithmetic_ms, True, 68e6),
            OpTime("aten.gelu", dtype, 2, 0.5, False, None)]
    return dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=rows,
                                                             op_ms_per_step=op_ms or arithmetic_ms + 0.5))


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


def _beside_busy_processes(r: WatchResult) -> WatchResult:
    return with_load(r, others_cpu_cores=1.0)


def test_beside_busy_processes_a_dtypes_products_are_their_flops_at_its_rate() -> None:
    from trainspeed.diagnose.rules import slow_dtype_candidates

    # the window's float64 products, less their threads' waits for a core, came to 4 ms of a 40 ms step: under
    # the bar alone, and no measure of them beside busy processes, where their 170 MFLOP at the dtype's 15 GFLOP/s
    # take 11.33 ms
    alone = _dtype_run("float64", 4.0)
    loaded = _beside_busy_processes(alone)
    assert slow_dtype_candidates(alone) == [] and slow_dtype_candidates(loaded) == ["float64"]
    ctx = dataclasses.replace(CTX, dtype_gflops={"float64": 15.0})
    assert "slow_dtype" not in ids(alone, ctx)
    v = next(v for v in diagnose(loaded, ctx) if v.id == "slow_dtype")
    took = 170e6 / 15e9 * 1e3
    assert f"{took:.2f} ms of the 40.00 ms step" in v.evidence
    assert "0.17 GFLOP at the float64 rate below" in v.evidence and "4.00 ms, are no measure of them" in v.evidence
    assert v.predicted_speedup == pytest.approx(40 / (40 - took * (1 - 15 / 100)), abs=0.01)
    # where the window's own time is the larger, it stands
    slow = next(v for v in diagnose(_beside_busy_processes(_dtype_run("float64", 30.0)), ctx) if v.id == "slow_dtype")
    assert "30.00 ms of the 40.00 ms step" in slow.evidence and "no measure" not in slow.evidence
    # products without a FLOP count are not nominated on the load alone
    rows = [dataclasses.replace(row, flops=None) for row in loaded.window.op_times]
    assert slow_dtype_candidates(dataclasses.replace(loaded, window=dataclasses.replace(loaded.window,
                                                                                       op_times=rows))) == []


def _autocast_cnn(autocast: str | None = "bfloat16", compiled: bool = False) -> WatchResult:
    """The digits CNN of 2026-11-26 under bfloat16 autocast on a Zen 4 pair: its convolutions ran at about 140
    GFLOP/s where the bfloat16 matmul probe read 347 and the float32 one 193."""
    from trainspeed.watch.result import OpTime

    r = recorded(3.77, {"data": 0.22, "forward": 1.40, "backward": 1.16, "optimizer": 0.42}, ops=220, flops=230.8e6,
                 batch=32, threads=2)
    rows = [OpTime("aten.convolution_backward", "bfloat16", 2, 1.03, True, 152.2e6),
            OpTime("aten.convolution", "bfloat16", 2, 0.59, True, 76.7e6),
            OpTime("aten.max_pool2d_with_indices", "bfloat16", 1, 0.41, False, None),
            OpTime("aten.mm", "bfloat16", 2, 0.14, True, 1.3e6),
            OpTime("aten.addmm", "bfloat16", 1, 0.12, True, 0.66e6)]
    return dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=rows, op_ms_per_step=3.1,
                                                             compiled=compiled), model=dataclasses.replace(r.model, autocast=autocast))


def test_arithmetic_in_a_probed_dtype_is_counted_at_its_rate_and_big_ops_at_their_window_time() -> None:
    from trainspeed.diagnose.rules.step_model import arithmetic_ms

    ctx = dataclasses.replace(CTX, matmul_gflops=193.0, dtype_gflops={"bfloat16": 347.0})
    r = _autocast_cnn()
    assert arithmetic_ms(r, ctx) == pytest.approx(230.8e6 / 347e9 * 1e3)  # every counted FLOP ran in bfloat16
    # the float32 rate where no bfloat16 probe ran
    assert arithmetic_ms(r, dataclasses.replace(ctx, dtype_gflops={})) == pytest.approx(230.8e6 / 193e9 * 1e3)
    v = diagnose(r, ctx)[0]
    assert v.id == "compute_bound"
    assert "347 GFLOP/s in bfloat16, 193 in float32" in v.evidence
    assert "took 1.62 ms in the profiler window" in v.evidence  # the two convolutions and their backward


def test_a_healthy_steps_levers_leave_out_what_the_run_does_already() -> None:
    ctx = dataclasses.replace(CTX, matmul_gflops=193.0, dtype_gflops={"bfloat16": 347.0})
    assert diagnose(_autocast_cnn(), ctx)[0].action == (
        "healthy; the run computes in bfloat16 (autocast) already; the next levers are torch.compile or a larger batch")
    assert diagnose(_autocast_cnn(compiled=True), ctx)[0].action == (
        "healthy; the run computes in bfloat16 (autocast) and is compiled already; the next lever is a larger batch")
    # a model cast to bfloat16 (no autocast): its FLOPs say so
    assert "the run computes in bfloat16 already" in diagnose(_autocast_cnn(None), ctx)[0].action
    big = recorded(110.0, {"forward": 40.0, "backward": 65.0, "optimizer": 2.0}, ops=30, flops=1e10)
    assert diagnose(big, CTX)[0].action == ("healthy; the next levers are bf16 autocast where the hardware has it, "
                                            "torch.compile, or a larger batch")


def _dcgan_like(conv_ms: float = 58.0) -> WatchResult:
    """A float32 CPU step of convolutions doing real work, shaped like examples/realistic/dcgan.py's (2026-12-07, Zen
    4): 6.98 GFLOP of 32 convolutions taking `conv_ms` of a 75 ms step, batch norm the rest of the compute."""
    from trainspeed.watch.result import OpTime

    r = recorded(75.0, {"forward": 30.0, "backward": 40.0, "optimizer": 3.0}, ops=362, flops=6.98e9)
    rows = [OpTime("aten.convolution", "float32", 16, 0.4 * conv_ms, True, 2.3e9, "forward"),
            OpTime("aten.convolution_backward", "float32", 16, 0.6 * conv_ms, True, 4.68e9, "backward"),
            OpTime("aten.native_batch_norm_backward", "float32", 9, 3.0, False, None, "backward")]
    return dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=rows, op_ms_per_step=conv_ms + 3.0))


def test_a_healthy_float32_step_on_a_cpu_with_native_bf16_is_predicted_its_bf16_autocast() -> None:
    """The healthy verdict predicts bf16 autocast where the bfloat16 matmul rate was probed (a CPU with native bf16)
    and is faster: the convolutions' FLOPs at the float32 rate less the same at the bfloat16 rate, what they took beyond
    their FLOPs kept (a DCGAN: the time at the rate alone said 1.54x, its bf16 arm measured 1.22x to 1.34x)."""
    from trainspeed.diagnose.rules.arithmetic import bf16_candidate

    r = _dcgan_like()
    ctx = dataclasses.replace(CTX, matmul_gflops=174.0)
    plain = diagnose(r, ctx)
    assert ids(r, ctx) == ["compute_bound"] and plain[0].predicted_speedup is None
    assert bf16_candidate(r, native_bf16=True) and not bf16_candidate(r, native_bf16=False)
    v = diagnose(r, dataclasses.replace(ctx, dtype_gflops={"bfloat16": 353.0}))[0]
    at_float32 = 6.98e9 / 174e6  # 40.1 ms of the 58 ms the convolutions took
    assert v.id == "compute_bound" and v.predicted_speedup == pytest.approx(
        75.0 / (75.0 - at_float32 * (1 - 174 / 353)), abs=0.01)
    assert v.title == "Healthy, and bf16 autocast would speed it up"
    assert v.fix == 'with torch.autocast("cpu", dtype=torch.bfloat16): the forward and loss'
    assert v.brief == "float32 matrix math: 77% of the step (58.0 ms); bfloat16 runs 2.0x as fast here"
    assert "353 GFLOP/s against 174 in float32" in v.evidence and "compare the loss" in v.evidence
    assert "torch.autocast(\"cpu\", dtype=torch.bfloat16)" in v.action
    # bfloat16 no faster than float32 (BF16_FASTER), or a run in bfloat16 already: no prediction, no probe wanted
    assert diagnose(r, dataclasses.replace(ctx, dtype_gflops={"bfloat16": 180.0}))[0].predicted_speedup is None
    autocast = dataclasses.replace(r, model=dataclasses.replace(r.model, autocast="bfloat16"))
    assert not bf16_candidate(autocast, native_bf16=True)
    # beside busy processes, the window's times less their waits a fifth of alone's: the FLOPs at the float32 rate
    # are the convolutions' time there, and the prediction stays alone's
    fast = _dcgan_like(conv_ms=11.6)
    busy = with_load(fast, others_cpu_cores=1.0)
    loaded = next(v for v in diagnose(busy, dataclasses.replace(ctx, dtype_gflops={"bfloat16": 353.0}))
                  if v.id == "compute_bound")
    assert loaded.predicted_speedup == pytest.approx(v.predicted_speedup, abs=0.02)
    # matrix arithmetic under BF16_SHARE of the step: not probed
    assert not bf16_candidate(_dcgan_like(conv_ms=15.0), native_bf16=True)
