"""The measure step (`trainspeed.measure`): the machine probes a run's measurements ask for, and only those, and the
memory estimate under memory pressure."""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any

import pytest
import torch
from recorded_runs import rendered, with_load
from torch import nn

from trainspeed.measure import _largest_batch
from trainspeed.report.html import doctor_html
from trainspeed.watch import Watcher
from trainspeed.watch.subject import RunSubject


def test_largest_batch_for_the_watched_model() -> None:
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    with Watcher(warmup=1, profile_steps=0) as w:
        opt = torch.optim.Adam(model.parameters())
        for _ in range(3):
            loss = model(torch.randn(32, 64)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    result = w.measurements()
    result = dataclasses.replace(result, process=dataclasses.replace(result.process, memory_capacity_bytes=8 * 2**20))
    subject = w.subject()  # what the watcher hands the probes: the model by reference, its input, its optimizer
    assert subject.model() is model and subject.input_spec == ([64], torch.float32) and subject.optimizer_kind == "adam"
    best = _largest_batch(subject, result)
    assert best is not None and 100 < best < 20_000
    assert _largest_batch(RunSubject(weakref.ref(model)), result) is None  # no input known: no estimate


def test_the_report_probes_only_the_dtypes_a_rule_needs_and_shows_the_slowest_ops(monkeypatch) -> None:
    from recorded_runs import recorded

    import trainspeed.measure as report_module
    from trainspeed.hardware import detect_hardware
    from trainspeed.hardware.cpu import usable_cores
    from trainspeed.report.json import doctor_dict
    from trainspeed.watch.result import OpTime

    probed: list[str] = []
    monkeypatch.setattr(report_module, "dtype_ratios", lambda names, **kw: probed.extend(names) or {n: 0.015 for n in names})
    hardware = detect_hardware()
    # torch's threads as many as the cores this process may use: no thread verdict, whose probes would run live (beside
    # busy processes 8 threads on 2 cores measured a step many times slower than 2, and that verdict came first)
    threads = min(hardware.cpu.physical_cores or 1, usable_cores() or hardware.cpu.physical_cores or 1)
    r = recorded(40.0, {"forward": 8.0, "backward": 30.0, "optimizer": 1.5}, ops=100, flops=170e6, threads=threads)
    rows = [OpTime("aten.mm", "bfloat16", 5, 30.0, True, 102e6), OpTime("aten.mm", "float64", 1, 2.0, True, 1e6),
            OpTime("aten.gelu", "bfloat16", 2, 0.5, False, None)]
    r = dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=rows, op_ms_per_step=33.0),
                            model=dataclasses.replace(r.model, autocast="bfloat16"))
    report = report_module.diagnose_run(r, hardware=hardware, dispatch_us=2.0, matmul_gflops=100.0)
    assert probed == ["bfloat16"]  # float64's 2 ms are not worth a probe
    assert report.verdicts[0].id == "slow_dtype" and report.context.dtype_gflops == {"bfloat16": 1.5}
    data = doctor_dict(report)
    assert data["probe"]["cpu_matmul_gflops_by_dtype"] == {"bfloat16": 1.5}
    assert data["ops_by_time"][0] == {"op": "aten.mm", "dtype": "bfloat16", "calls": 5, "ms": 30.0,
                                      "arithmetic": True, "flops": 102e6, "phase": None}
    assert data["per_step"]["ops_ms"] == 33.0 and data["autocast"] == "bfloat16"
    assert "; batch 64, under bfloat16 autocast" in rendered(report)
    assert "op aten.mm (bfloat16) x5: 30.000 ms per step in the profiler window, 3.4 GFLOP/s" in rendered(report)
    # beside busy processes the ops' times are less their threads' summed waits: said, and no rate read off them
    shared = dataclasses.replace(report, watch=with_load(report.watch, others_cpu_cores=2.0))
    text = " ".join(rendered(shared).split())
    assert "op aten.mm (bfloat16) x5: 30.000 ms per step in the profiler window" in text
    assert "profiler window, 3.4 GFLOP/s" not in text
    assert "the ops' times below are less their threads' waits for a core, summed" in text
    assert ">3.4<" in doctor_html(report) and ">3.4<" not in doctor_html(shared)
    assert "a parallel op's can read below its work" in doctor_html(shared)
    page = doctor_html(report)
    assert "The step's slowest ops" in page and "1.5 in bfloat16" in page


def test_a_dtypes_rate_is_the_settled_float32_rate_in_the_dtypes_proportion_to_it(monkeypatch) -> None:
    from recorded_runs import recorded

    import trainspeed.measure as report_module
    from trainspeed.hardware import detect_hardware
    from trainspeed.watch.result import OpTime

    asked: list[list[str]] = []
    monkeypatch.setattr(report_module, "dtype_ratios", lambda names, **kw: asked.append(names) or {"float64": 0.4})
    monkeypatch.setattr(report_module, "cpu_matmul_gflops", lambda: 120.0)
    r = recorded(12.0, {"forward": 3.0, "backward": 7.0, "optimizer": 1.0}, ops=40, flops=1e9, threads=1)
    r = dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=[OpTime("aten.mm", "float64", 8, 9.0,
                                                                                     True, 1e9)], op_ms_per_step=10.0))
    report = report_module.diagnose_run(r, hardware=detect_hardware(), dispatch_us=2.0, thread_rates=(1.0, 1.0))
    assert asked == [["float64"]] and report.context.matmul_gflops == 120.0
    assert report.context.dtype_gflops == {"float64": pytest.approx(48.0)}
    assert report.verdicts[0].id == "slow_dtype"


def test_the_pauses_between_a_rate_probes_rounds_run_the_other_probes(monkeypatch) -> None:
    """The optimizer's, the loaders' and the cell loop's probes run in the pauses between dtype_ratios' rounds (a
    sleep of 0.3 s after every float64 run's script), before the matmul rate is read again after them all."""
    from recorded_runs import recorded

    import trainspeed.measure as report_module
    from trainspeed.hardware import detect_hardware
    from trainspeed.watch.result import OpTime

    order: list[str] = []

    def rounds(names, pause):
        for i in range(3):
            if i:
                pause(0.15)
            order.append(f"round {i}")
        return {"float64": 0.4}

    monkeypatch.setattr(report_module, "dtype_ratios", rounds)
    monkeypatch.setattr(report_module, "_optimizer_probe", lambda *a: order.append("optimizer") or (None, None))
    monkeypatch.setattr(report_module, "_cell_probe", lambda *a: order.append("cells") or (None, None))
    monkeypatch.setattr(report_module, "settled_gflops", lambda *a: order.append("matmul again") or 120.0)
    r = recorded(12.0, {"forward": 3.0, "backward": 7.0, "optimizer": 1.0}, ops=40, flops=1e9, threads=1)
    r = dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=[OpTime("aten.mm", "float64", 8, 9.0,
                                                                                     True, 1e9)], op_ms_per_step=10.0))
    report = report_module.diagnose_run(r, hardware=detect_hardware(), dispatch_us=2.0, thread_rates=(1.0, 1.0))
    assert order.index("optimizer") < order.index("round 1") and order.index("cells") < order.index("round 2")
    assert order[-1] == "matmul again" and report.context.dtype_gflops == {"float64": pytest.approx(48.0)}


def test_the_report_probes_the_optimizer_only_where_its_phase_is_worth_it(monkeypatch) -> None:
    from recorded_runs import adamw_run

    import trainspeed.measure as report_module
    from trainspeed.hardware import detect_hardware
    from trainspeed.probe.optimizer import spec_of
    from trainspeed.report.json import doctor_dict

    calls: list[bool | None] = []
    monkeypatch.setattr(report_module, "step_ms", lambda spec, fused: calls.append(fused) or 1.4)
    monkeypatch.setattr(report_module, "step_reading", lambda spec, fused: calls.append(fused) or (7.4, 12.0))

    class Watched:
        optimizer_spec = spec_of(torch.optim.AdamW(nn.Linear(4, 4).parameters(), foreach=False))

    hw = detect_hardware()
    report = report_module.diagnose_run(adamw_run(), subject=Watched(), hardware=hw, dispatch_us=2.0,
                                        matmul_gflops=100.0)
    assert calls == [None, True] and report.context.optimizer_ms == (7.4, 1.4)
    assert "optimizer_heavy" in [v.id for v in report.verdicts]
    data = doctor_dict(report)
    assert data["probe"]["optimizer_step_ms"] == {"configured": 7.4, "fused": 1.4}
    assert report.context.optimizer_faults == 12.0 and data["probe"]["optimizer_step_page_faults"] == 12.0
    assert data["optimizer"] == {"kind": "AdamW", "tensors": 162, "elements": 44932, "foreach": False, "fused": None}
    assert "ms fused" in doctor_html(report)
    calls.clear()
    small = report_module.diagnose_run(adamw_run(opt_ms=1.0), subject=Watched(), hardware=hw, dispatch_us=2.0,
                                       matmul_gflops=100.0)
    assert calls == [] and small.context.optimizer_ms is None
    assert doctor_dict(dataclasses.replace(small))["probe"]["optimizer_step_ms"] is None


def test_the_report_probes_the_threads_only_where_torch_has_more_than_the_cores_or_than_others_left(monkeypatch) -> None:
    from recorded_runs import recorded

    import trainspeed.measure as report_module
    from trainspeed.hardware import detect_hardware
    from trainspeed.report.json import doctor_dict

    hw = detect_hardware()
    cores = hw.cpu.physical_cores or 1
    asked: list[tuple[int, tuple[int, int]]] = []
    monkeypatch.setattr(report_module, "thread_gflops", lambda n, threads, **kw: asked.append((n, threads)) or (50.0, 100.0))
    stepped: list[tuple[int, tuple[int, int]]] = []
    monkeypatch.setattr(report_module, "thread_step_ms", lambda n, threads, **kw: stepped.append((n, threads)) or (6.0, 3.0))
    r = recorded(15.0, {"forward": 5.0, "backward": 8.0, "optimizer": 1.0}, ops=55, flops=1e9, threads=cores)
    report = report_module.diagnose_run(r, hardware=hw, dispatch_us=2.0, matmul_gflops=100.0)
    assert asked == stepped == [] and doctor_dict(report)["probe"]["threads_matmul_gflops"] is None
    over = dataclasses.replace(r, process=dataclasses.replace(r.process, torch_threads=4 * cores))
    report = report_module.diagnose_run(over, hardware=hw, dispatch_us=2.0, matmul_gflops=100.0)
    assert asked == [(256, (4 * cores, cores))]  # no matrix op timed: a 256 x 256 product
    assert stepped == [(256, (4 * cores, cores))]  # more threads than cores: a step at each count too
    assert doctor_dict(report)["probe"]["threads_matmul_gflops"] == {"as_run": 50.0, "advised": 100.0}
    assert doctor_dict(report)["probe"]["threads_step_ms"] == {"as_run": 6.0, "advised": 3.0}
    assert report.verdicts[0].id == "thread_oversubscription"
    # as many threads as cores, beside processes that kept every hardware thread busy: mean steps at one thread and
    # at the run's beside them
    stepped.clear()
    monkeypatch.setattr(report_module, "loaded_step_ms", lambda n, threads: stepped.append((n, threads)) or (6.0, 3.0))
    logical = hw.cpu.logical_threads or 1
    busy = dataclasses.replace(with_load(r, others_cpu_cores=float(logical)),
                               process=dataclasses.replace(r.process, torch_threads=2))
    report = report_module.diagnose_run(busy, hardware=hw, dispatch_us=2.0, matmul_gflops=100.0)
    assert stepped == [(256, (2, 1))]
    assert doctor_dict(report)["probe"]["threads_step_ms"] == {"as_run": 6.0, "advised": 3.0}


def test_the_matmul_rate_is_read_again_after_the_other_probes(monkeypatch) -> None:
    """A reading taken while another tenant held a core (the one-thread rate at two threads) is not the CPU's rate:
    launch_bound would count the arithmetic at half the speed the run's ops had."""
    from recorded_runs import recorded

    import trainspeed.measure as report_module
    from trainspeed.hardware import detect_hardware

    readings = iter([104.0, 104.0, 194.0, 190.0])  # before the hardware's detection, before and after the other probes, once more
    monkeypatch.setattr(report_module, "cpu_matmul_gflops", lambda: next(readings))
    # one intra-op thread: no thread verdict, whose prediction a live probe on this (maybe shared) machine makes
    r = recorded(0.7, {"forward": 0.14, "backward": 0.24, "optimizer": 0.29}, ops=100, flops=20e6, threads=1)
    hardware = detect_hardware()
    monkeypatch.setattr(report_module, "detect_hardware", lambda: hardware)
    report = report_module.diagnose_run(r, dispatch_us=1.15, thread_rates=(1.0, 1.0))
    assert report.context.matmul_gflops == 194.0
    assert report.verdicts[0].id == "launch_bound"




def test_the_gpu_peak_follows_the_run_s_math(monkeypatch) -> None:
    """CUDA: the peak a step's FLOP rate is held against is the run's GPU's, in the run's arithmetic: half precision
    under a bfloat16 autocast or with the model in bfloat16, TF32 where torch allows it, else FP32."""
    from trainspeed.hardware import detect_hardware
    from trainspeed.hardware.gpu import GpuScan, Pcie, build_gpu_info

    h100 = build_gpu_info(0, "NVIDIA H100 80GB HBM3", (9, 0), vram_total=None, vram_free=None, sm_count=132,
                          pcie=Pcie(None, None), driver=None, cuda=None, torch_usable=True)
    hw = dataclasses.replace(detect_hardware(), gpu=GpuScan([h100], True, True, None))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    kept = torch.backends.cuda.matmul.allow_tf32  # a property of torch's (monkeypatch cannot put it back)
    try:
        _peaks_in_each_math(hw)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = kept


def _peaks_in_each_math(hw: Any) -> None:
    from recorded_runs import recorded

    from trainspeed.hardware.gpu import GpuScan
    from trainspeed.measure import _gpu_peak

    torch.backends.cuda.matmul.allow_tf32 = False
    run = recorded(10.0, {"forward": 3.0, "backward": 6.0, "optimizer": 0.5}, dev="cuda", flops=1e12, busy=9.0)
    fp32 = _gpu_peak(hw, run, None)
    assert fp32 is not None and (fp32.math, fp32.tflops) == ("fp32", 67)
    bf16 = _gpu_peak(hw, dataclasses.replace(run, model=dataclasses.replace(run.model, autocast="bfloat16")), None)
    assert bf16 is not None and (bf16.math, bf16.tflops) == ("bf16/fp16", 989.5)
    model = nn.Linear(4, 4).to(torch.bfloat16)  # a model cast whole, no autocast
    half = _gpu_peak(hw, run, RunSubject(weakref.ref(model)))
    assert half is not None and half.math == "bf16/fp16"
    torch.backends.cuda.matmul.allow_tf32 = True  # as torch.set_float32_matmul_precision("high") sets it
    tf32 = _gpu_peak(hw, run, None)
    assert tf32 is not None and (tf32.math, tf32.tflops) == ("tf32", 494.5)
    assert _gpu_peak(hw, dataclasses.replace(run, model=dataclasses.replace(run.model, device="cpu")), None) is None
    assert _gpu_peak(hw, run, None) == tf32 and _gpu_peak(
        dataclasses.replace(hw, gpu=GpuScan([], True, True, None)), run, None) is None


def test_beside_busy_processes_the_loader_is_probed_where_the_judged_run_waits_on_it(monkeypatch) -> None:
    # a tokenizing __getitem__ beside two busy processes (hf_trainer.py --tokenize-in-loader, 2026-11-28): its wait on
    # data 15% of the loaded step, whose forward and backward lost most of their time waiting for a core; 39% of the
    # step less those waits. input_bound judges the latter, and its advice on workers needs the handover probe

    from recorded_runs import recorded

    import trainspeed.measure as report_module
    from trainspeed.hardware import detect_hardware
    from trainspeed.probe.loader import Handover
    from trainspeed.watch.result import LoaderInfo

    asked: list[int] = []
    monkeypatch.setattr(report_module, "handover_ms",
                        lambda item, batch: asked.append(batch) or Handover(wall_ms=1.38, main_ms=0.65))
    run = recorded(229.6, {"data": 34.4, "forward": 72.5, "backward": 80.5, "optimizer": 1.7}, threads=2,
                   loaders=[LoaderInfo(0, False, 32, False)])
    waits = {"forward": 45.0, "backward": 53.0, "optimizer": 1.0, "data": 5.0}
    run = with_load(run, waits, others_cpu_cores=1.1)
    assert run.phases["data"].share < 0.2

    class Watched:
        optimizer_spec = None
        loader_probes = [(torch.zeros(8), 0)]

    hw = detect_hardware()
    report = report_module.diagnose_run(run, subject=Watched(), hardware=hw, dispatch_us=2.0, matmul_gflops=100.0)
    assert asked == [32] and report.context.handover == Handover(wall_ms=1.38, main_ms=0.65)
    # no other process busy: the waits are the script's own threads', judged as measured
    alone = with_load(run, others_cpu_cores=0.0)
    asked.clear()
    report_module.diagnose_run(alone, subject=Watched(), hardware=hw, dispatch_us=2.0, matmul_gflops=100.0)
    assert asked == []


def test_a_declared_probe_runs_where_the_run_wants_it_and_its_reading_reaches_the_rules(monkeypatch) -> None:
    """A rule's probe (`rules.probes.Probe`) is taken where the run wants it, by its "module:function", and its reading
    is the rules' by name (`Context.probed`) and the JSON report's; one the run does not want is not taken, and one
    given is not taken again."""
    from recorded_runs import recorded

    import trainspeed.measure as measure
    from trainspeed.diagnose.rules.probes import Probe
    from trainspeed.hardware import detect_hardware
    from trainspeed.report.json import doctor_dict

    wanted = Probe("seen_steps", lambda r: r.steps.seen > 10, "builtins:repr")
    unwanted = Probe("never", lambda r: False, "builtins:eval")
    monkeypatch.setattr(measure, "declared", lambda: [wanted, unwanted])
    run = recorded(5.0, {"forward": 2.0})
    report = measure.diagnose_run(run, hardware=detect_hardware(), dispatch_us=2.0, matmul_gflops=100.0)
    assert set(report.context.probed) == {"seen_steps"} and report.context.probed["seen_steps"].startswith("ProbeRun(")
    assert doctor_dict(report)["probe"]["seen_steps"] == report.context.probed["seen_steps"]
    given = measure.diagnose_run(run, hardware=detect_hardware(), dispatch_us=2.0, matmul_gflops=100.0,
                                 probed={"seen_steps": 3})
    assert given.context.probed == {"seen_steps": 3}


def test_a_time_first_models_larger_batches_grow_its_second_dimension(monkeypatch: pytest.MonkeyPatch) -> None:
    """A word language model fed (time, batch) token windows: the estimate's batches of b are (time, b)."""
    import trainspeed.memory.estimate as estimate

    model = nn.Sequential(nn.Embedding(50, 8), nn.Linear(8, 50))
    subject = RunSubject(weakref.ref(model), ([7], torch.int64), batch_dim=1)
    made = []
    real = estimate.Estimator

    def recording(model: nn.Module, make: Any, **kwargs: Any) -> Any:
        made.append(tuple(make(3).shape))
        return real(model, make, **kwargs)

    monkeypatch.setattr(estimate, "Estimator", recording)
    with Watcher(warmup=1, profile_steps=0) as w:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            loss = model(torch.randint(0, 50, (7, 4))).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    result = w.measurements()
    result = dataclasses.replace(result, process=dataclasses.replace(result.process, memory_capacity_bytes=8 * 2**20))
    assert _largest_batch(subject, result) is not None and made == [(7, 3)]
