"""Each knob's values and analysis, fed recorded points (no training)."""

import pytest

from trainspeed.errors import UsageError
from trainspeed.sweep.knobs import KNOBS
from trainspeed.sweep.result import SweepPoint, SweepResult
from trainspeed.sweep.summary import best_and_ties
from trainspeed.sweep.sweep import plan


def point(value, seconds, spread=0.01, **extras):
    return SweepPoint(value, seconds, seconds * (1 - spread), seconds * (1 + spread), True, trials=5, extras=extras)


def analysed(knob, ctx, points):
    result = SweepResult(knob.name, ctx.spec, ctx.device, ctx.steps, 5, points)
    result.best, result.same_as_best = best_and_ties(points, lambda p: knob.score(p, ctx.steps))
    knob.analyse(result, ctx)
    return result


@pytest.mark.parametrize("knob, workload, values, message", [
    ("nope", "iris", None, "unknown knob 'nope'"),
    ("threads", "nope", None, "unknown workload 'nope'"),
    ("threads", "iris", "", "the list is empty"),
    ("threads", "iris", "two", "expected a positive integer, got 'two'"),
    ("threads", "iris", "0", "expected a positive integer"),
    ("record-every", "iris", "1,sometimes", "a positive integer or 'never'"),
    ("amp", "iris", "fp8", "expected one of fp32, bf16, fp16"),
    ("compile", "iris", "maybe", "expected one of on, off"),
    ("num-workers", "digits-aug", "2+turbo", "a worker count like 4"),
    ("num-workers", "digits-aug", "0+persistent", "need at least one worker"),
    ("accumulate", "iris", "7", "does not split into 7"),
    ("crossover", "iris", None, "use a sized built-in workload"),
    ("checkpoint-save", "iris", "often", "expected one of none, sync, thread"),
    ("threads", "mlp:width=0", None, "width must be a positive integer"),
    ("threads", "mlp:height=3", None, "unknown parameter 'height'"),
    ("world-size", "iris", "9999", "9999 ranks cannot run here"),
    ("world-size", "iris", "two", "expected a number of ranks"),
])
def test_bad_values_are_one_line_usage_errors(knob, workload, values, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan(knob, workload, values)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the CPU-only message")
def test_cuda_only_knobs_and_pinning_refused_without_cuda():
    with pytest.raises(UsageError, match="needs a CUDA device"):
        plan("cuda-graphs", "iris")
    with pytest.raises(UsageError, match="pin_memory"):
        plan("num-workers", "digits-aug", "2+pin")


def test_defaults_fit_the_machine(monkeypatch):
    k, ctx = plan("record-every", "iris", steps=100)
    assert ctx.values == ["1", "2", "5", "10", "20", "50", "100", "never"]
    k, ctx = plan("accumulate", "iris")
    assert ctx.values == ["1", "2", "4", "8"]  # divisors of the full batch of 120
    k, ctx = plan("num-workers", "digits-aug")
    assert ctx.values[0] == "0" and ctx.values[-1].endswith("+persistent")
    k, ctx = plan("threads", "iris", "4,2,2")
    assert ctx.values == ["4", "2"]


def test_record_every_fits_a_line_and_reports_the_cost_of_a_record():
    k, ctx = plan("record-every", "iris", "1,10,100,never", steps=1000)
    # 1000 steps of 1 ms; a record costs 20 us
    pts = [point(v, 1.0 + 20e-6 * n, 0.0005) for v, n in (("1", 1000), ("10", 100), ("100", 10), ("never", 0))]
    pts[0].extras.update(reads=1000, read_s=0.015)
    r = analysed(k, ctx, pts)
    assert r.findings["fit"]["b"] == pytest.approx(20e-6, rel=1e-6)
    assert r.findings["fit"]["a"] == pytest.approx(1.0, rel=1e-6)
    assert r.findings["fit"]["r2"] == pytest.approx(1.0)
    assert r.findings["linear"] is True
    assert pts[0].extras["cost_per_record_us"] == pytest.approx(20.0, rel=1e-3)
    assert pts[1].extras["cost_per_record_us"] == pytest.approx(20.0, rel=1e-3)
    assert "cost_per_record_us" not in pts[2].extras  # 0.2 ms more, inside the 0.05% interval: not measurable
    assert pts[0].extras["read_us"] == pytest.approx(15.0)
    assert r.recommendation.startswith("record every 100 steps")  # the most frequent within noise of never


def test_record_every_says_when_it_is_not_linear():
    k, ctx = plan("record-every", "iris", "1,10,100,never", steps=1000)
    # a read costs more when rare: 1000 reads add 10 ms, 10 reads add 50 ms
    pts = [point("1", 1.010, 0.001), point("10", 1.030, 0.001), point("100", 1.050, 0.001), point("never", 1.0, 0.001)]
    r = analysed(k, ctx, pts)
    assert r.findings["linear"] is False
    assert "not linear" in r.findings["why"]
    assert pts[2].extras["cost_per_record_us"] == pytest.approx(5000, rel=1e-3)


def test_batch_size_knee_and_throughput(monkeypatch):
    import trainspeed.sweep.knobs.batch_size as bs

    monkeypatch.setattr(bs, "largest_fit", lambda wl, device, data: (3000, 2**30, ""))
    k, ctx = plan("batch-size", "mlp", "16,64,256,1024", steps=10)
    # step time: 1 ms fixed + 1 us per sample -> throughput saturates
    pts = [point(str(b), 10 * (1e-3 + b * 1e-6)) for b in (16, 64, 256, 1024)]
    ctx.setups = {"256": {"peak_bytes": 10 * 2**20}, "1024": {"peak_bytes": 40 * 2**20}}
    r = analysed(k, ctx, pts)
    assert r.best == "1024"
    assert pts[0].extras["samples_per_s"] == pytest.approx(16 / 1.016e-3)
    assert r.findings["knee"] == "1024"
    assert r.findings["largest_fit"] == {"batch": 3000, "budget_bytes": 2**30, "predicted": True}
    pts = [point(str(b), 10 * (1e-5 + b * 1e-6)) for b in (16, 64, 256, 1024)]
    r = analysed(k, ctx, pts)
    assert r.findings["knee"] == "256"  # 962k samples/s, 97% of 1024's 990k; 64 reaches 87%
    assert "batch" in r.recommendation


def test_compile_break_even_from_the_first_step():
    k, ctx = plan("compile", "iris", steps=100)
    ctx.setups = {"on": {"first_step_s": 12.0, "warmup_step_s": 0.001}, "off": {"first_step_s": 0.01,
                                                                                "warmup_step_s": 0.002}}
    r = analysed(k, ctx, [point("off", 0.2), point("on", 0.1)])  # 2 ms -> 1 ms per step
    assert r.findings["compile_s"] == pytest.approx(11.999)
    assert r.findings["break_even_steps"] == 11999 + 1
    assert "compile for jobs longer than 12,000 steps" in r.recommendation


@pytest.mark.parametrize("features, said", [(["AVX2"], True), (["AVX2", "AVX-512", "AVX512-BF16", "AMX-BF16"], False)])
def test_amp_says_no_native_bf16_only_of_a_cpu_without_it(monkeypatch, features, said):
    import dataclasses

    import trainspeed.sweep.knobs.simple as simple
    from trainspeed.hardware.cpu import detect_cpu

    cpu = dataclasses.replace(detect_cpu(), features=features)
    monkeypatch.setattr(simple, "detect_cpu", lambda: cpu)
    k, ctx = plan("amp", "iris", steps=100)
    r = analysed(k, ctx, [point("fp32", 0.1), point("bf16", 0.1)])
    assert r.recommendation.startswith("stay in fp32")
    assert ("this CPU has no native bf16" in r.recommendation) == said


def test_device_without_cuda_predicts_the_gpu_side(monkeypatch):
    import trainspeed.sweep.knobs.device as dev

    monkeypatch.setattr(dev, "cpu_dispatch_us", lambda: 2.0)
    k, ctx = plan("device", "iris", "cpu,cuda", steps=100)
    ctx.cuda = False
    ctx.setups = {"cpu": {"ops_per_step": 30, "flops_per_step": 1e5}}
    r = analysed(k, ctx, [point("cpu", 0.03)])
    cuda = next(p for p in r.points if p.value == "cuda")
    assert cuda.predicted and cuda.ci_low is None
    assert cuda.extras["step_ms"] == pytest.approx(30 * 15e-3)  # host bound: 30 ops x (2 + 13 us)
    assert "predicted" in r.recommendation and "the CPU" in r.recommendation


def test_the_seeds_job_is_not_predicted_faster_on_a_gpu_and_a_prediction_says_so(monkeypatch):
    # the seed's Iris MLP: 42 ops a step, 0.1 MFLOP, 0.4 ms a step on a CPU; the demo measured the GPU slower
    import trainspeed.sweep.knobs.device as dev

    monkeypatch.setattr(dev, "cpu_dispatch_us", lambda: 2.0)
    k, ctx = plan("device", "iris", "cpu,cuda", steps=100)
    ctx.cuda = False
    ctx.setups = {"cpu": {"ops_per_step": 42, "flops_per_step": 9.6e4}}
    r = analysed(k, ctx, [point("cpu", 100 * 0.4e-3)])
    assert r.recommendation.startswith("train on the CPU (predicted for an RTX 3080, not measured: no CUDA device "
                                       "here)")
    ctx.setups = {"cpu": {"ops_per_step": 42, "flops_per_step": 1e12}}  # a large step: the GPU wins, said as predicted
    r = analysed(k, ctx, [point("cpu", 100 * 2.0)])
    assert r.recommendation.startswith("train on the GPU (predicted for an RTX 3080, not measured")


def test_crossover_grid_with_predicted_gpu(monkeypatch):
    import trainspeed.sweep.knobs.device as dev

    monkeypatch.setattr(dev, "cpu_dispatch_us", lambda: 2.0)
    k, ctx = plan("crossover", "mlp", "16,1024", steps=10, batches=[16, 1024])
    ctx.cuda = False
    arms = k.arms(ctx.values, ctx)
    assert [a.value for a in arms] == ["w=16,b=16,cpu", "w=16,b=1024,cpu", "w=1024,b=16,cpu", "w=1024,b=1024,cpu"]
    assert arms[3].workload.params["width"] == 1024 and arms[3].workload.batch_size == 1024
    flops = {16: 1e5, 1024: 1e10}
    ctx.setups = {a.value: {"ops_per_step": 40, "flops_per_step": flops[int(a.value.split(",")[0][2:])] *
                            int(a.value.split(",")[1][2:]) / 16} for a in arms}
    cpu_ms = {"w=16,b=16,cpu": 0.2, "w=16,b=1024,cpu": 0.5, "w=1024,b=16,cpu": 60.0, "w=1024,b=1024,cpu": 4000.0}
    r = analysed(k, ctx, [point(v, t * 10 / 1e3) for v, t in cpu_ms.items()])
    grid = r.findings["grid"]
    assert grid["cuda_predicted"] and grid["widths"] == [16, 1024] and grid["batches"] == [16, 1024]
    assert grid["cpu_ms"][1][1] == pytest.approx(4000.0)
    assert grid["cuda_ms"][0][0] == pytest.approx(40 * 15e-3)  # launch-bound: ops x (dispatch + launch)
    assert grid["cuda_ms"][1][1] > grid["cuda_ms"][0][0]
    assert "w=16,b=16,cuda" in [p.value for p in r.points if p.predicted]
    assert "the CPU is faster at 16x16" in r.recommendation


def test_every_knob_is_listed():
    assert set(KNOBS) == {"record-every", "batch-size", "num-workers", "threads", "device", "crossover", "amp",
                          "compile", "cuda-graphs", "accumulate", "activation-checkpointing", "checkpoint-save",
                          "world-size"}
