"""The doctor's report object: memory pressure brings the estimator's largest batch."""

from __future__ import annotations

import dataclasses
import weakref

import pytest
import torch
from rich.console import Console
from torch import nn

from trainspeed.diagnose.report import DoctorReport
from trainspeed.measure import _largest_batch
from trainspeed.report.html import doctor_html
from trainspeed.report.text import doctor_view
from trainspeed.watch import Watcher


class _FakeWatcher:
    def __init__(self, model: nn.Module) -> None:
        self.model = weakref.ref(model)
        self.input_spec = ([64], torch.float32)
        self.optimizer_kind = "adam"


def _rendered(report: DoctorReport) -> str:
    """The terminal summary as text, wide enough that no line wraps."""
    console = Console(width=200, record=True)
    console.print(doctor_view(report))
    return console.export_text()


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
    result = type(result)(**{**result.__dict__, "memory_capacity_bytes": 8 * 2**20})
    best = _largest_batch(_FakeWatcher(model), result)
    assert best is not None and 100 < best < 20_000


def test_callable_package_and_html() -> None:
    import trainspeed
    import trainspeed.watch.syncs as syncs_module  # the package stays importable as a package

    assert callable(trainspeed.watch) and syncs_module.SyncCounter
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with trainspeed.watch(warmup=1, profile_steps=1) as w:
        for _ in range(10):
            loss = model(torch.randn(8, 4)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    report = w.result()
    html = doctor_html(report)
    assert "<h1>trainspeed doctor</h1>" in html and "forward" in html
    assert report.watch.steps_seen == 10 and report.context.dispatch_us > 0 and report.context.matmul_gflops > 0


def test_a_cuda_report_says_what_device_ms_is_and_how_much_the_gpu_works() -> None:
    from recorded_runs import recorded

    from trainspeed.hardware import detect_hardware
    from trainspeed.measure import diagnose_run

    # the detailed steps' medians add up to more than the median step, as on a real tiny step; the shares, from
    # sums, add up to 1
    r = recorded(1.2, {"forward": 0.43, "backward": 0.67, "optimizer": 0.25}, {"forward": 0.42, "backward": 0.66},
                 dev="cuda", ops=28, kernels=21, flops=40800, busy=0.055,
                 shares={"forward": 0.3, "backward": 0.47, "optimizer": 0.18})
    report = diagnose_run(r, hardware=detect_hardware(), dispatch_us=1.4, matmul_gflops=700, launch_us=14.5)
    text = _rendered(report)
    assert "the GPU works 0.055 ms of the step, 5%" in text and "idle gaps included" in text
    page = doctor_html(report)
    assert "the GPU works 0.055 ms of the step, 5%" in page and "14.50 us on CUDA" in page
    assert [v.id for v in report.verdicts][:2] == ["launch_bound", "cpu_faster"]


def test_the_report_probes_only_the_dtypes_a_rule_needs_and_shows_the_slowest_ops(monkeypatch) -> None:
    import dataclasses

    from recorded_runs import recorded

    import trainspeed.measure as report_module
    from trainspeed.hardware import detect_hardware
    from trainspeed.report.json import doctor_dict
    from trainspeed.watch.result import OpTime

    probed: list[str] = []
    monkeypatch.setattr(report_module, "cpu_dtype_gflops", lambda name: probed.append(name) or 1.5)
    r = recorded(40.0, {"forward": 8.0, "backward": 30.0, "optimizer": 1.5}, ops=100, flops=170e6)
    rows = [OpTime("aten.mm", "bfloat16", 5, 30.0, True, 102e6), OpTime("aten.mm", "float64", 1, 2.0, True, 1e6),
            OpTime("aten.gelu", "bfloat16", 2, 0.5, False, None)]
    r = dataclasses.replace(r, op_times=rows, op_ms_per_step=33.0, autocast="bfloat16")
    report = report_module.diagnose_run(r, hardware=detect_hardware(), dispatch_us=2.0, matmul_gflops=100.0)
    assert probed == ["bfloat16"]  # float64's 2 ms are not worth a probe
    assert report.verdicts[0].id == "slow_dtype" and report.context.dtype_gflops == {"bfloat16": 1.5}
    data = doctor_dict(report)
    assert data["probe"]["cpu_matmul_gflops_by_dtype"] == {"bfloat16": 1.5}
    assert data["ops_by_time"][0] == {"op": "aten.mm", "dtype": "bfloat16", "calls": 5, "ms": 30.0,
                                      "arithmetic": True, "flops": 102e6}
    assert data["per_step"]["ops_ms"] == 33.0 and data["autocast"] == "bfloat16"
    assert "; batch 64, under bfloat16 autocast" in _rendered(report)
    assert "op aten.mm (bfloat16) x5: 30.000 ms per step in the profiler window, 3.4 GFLOP/s" in _rendered(report)
    page = doctor_html(report)
    assert "The slowest ops" in page and "1.5 in bfloat16" in page


def test_the_float32_rate_beside_a_dtype_probe_is_measured_in_turn_with_it(monkeypatch) -> None:
    from recorded_runs import recorded

    import trainspeed.measure as report_module
    from trainspeed.hardware import detect_hardware
    from trainspeed.watch.result import OpTime

    asked: list[list[str]] = []
    monkeypatch.setattr(report_module, "paired_dtype_gflops", lambda names: asked.append(names) or (120.0, {"float64": 50.0}))
    monkeypatch.setattr(report_module, "cpu_matmul_gflops", lambda: pytest.fail("float32 probed apart"))
    r = recorded(12.0, {"forward": 3.0, "backward": 7.0, "optimizer": 1.0}, ops=40, flops=1e9, threads=1)
    r = dataclasses.replace(r, op_times=[OpTime("aten.mm", "float64", 8, 9.0, True, 1e9)], op_ms_per_step=10.0)
    report = report_module.diagnose_run(r, hardware=detect_hardware(), dispatch_us=2.0, thread_rates=(1.0, 1.0))
    assert asked == [["float64"]] and report.context.matmul_gflops == 120.0 and report.context.dtype_gflops == {"float64": 50.0}
    assert report.verdicts[0].id == "slow_dtype"


def test_the_report_probes_the_optimizer_only_where_its_phase_is_worth_it(monkeypatch) -> None:
    import dataclasses

    from recorded_runs import adamw_run

    import trainspeed.measure as report_module
    from trainspeed.hardware import detect_hardware
    from trainspeed.probe.optimizer import spec_of
    from trainspeed.report.json import doctor_dict

    calls: list[bool | None] = []
    monkeypatch.setattr(report_module, "step_ms", lambda spec, fused: calls.append(fused) or (1.4 if fused else 7.4))

    class Watched:
        optimizer_spec = spec_of(torch.optim.AdamW(nn.Linear(4, 4).parameters(), foreach=False))

    hw = detect_hardware()
    report = report_module.diagnose_run(adamw_run(), subject=Watched(), hardware=hw, dispatch_us=2.0,
                                        matmul_gflops=100.0)
    assert calls == [None, True] and report.context.optimizer_ms == (7.4, 1.4)
    assert "optimizer_heavy" in [v.id for v in report.verdicts]
    data = doctor_dict(report)
    assert data["probe"]["optimizer_step_ms"] == {"configured": 7.4, "fused": 1.4}
    assert data["optimizer"] == {"kind": "AdamW", "tensors": 162, "elements": 44932, "foreach": False, "fused": None}
    assert "ms fused" in doctor_html(report)
    calls.clear()
    small = report_module.diagnose_run(adamw_run(opt_ms=1.0), subject=Watched(), hardware=hw, dispatch_us=2.0,
                                       matmul_gflops=100.0)
    assert calls == [] and small.context.optimizer_ms is None
    assert doctor_dict(dataclasses.replace(small))["probe"]["optimizer_step_ms"] is None


def test_a_prediction_at_the_models_cap_is_shown_as_a_floor() -> None:
    import dataclasses

    from recorded_runs import recorded

    from trainspeed.diagnose.rules import MAX_PREDICTED, predicted_label
    from trainspeed.diagnose.verdict import Verdict
    from trainspeed.hardware import detect_hardware
    from trainspeed.measure import diagnose_run

    assert predicted_label(2.214) == "predicted 2.21x"
    assert predicted_label(MAX_PREDICTED) == "predicted at least 10x (no prediction goes past 10x)"
    r = recorded(40.0, {"forward": 8.0, "backward": 30.0, "optimizer": 1.5}, ops=100, flops=170e6)
    report = diagnose_run(r, hardware=detect_hardware(), dispatch_us=2.0, matmul_gflops=100.0)
    capped = dataclasses.replace(report, verdicts=[Verdict("slow_dtype", "e", "a", MAX_PREDICTED),
                                                   Verdict("small_batch", "e", "a", 1.5)])
    text = _rendered(capped)
    assert "1. slow_dtype - predicted at least 10x" in text and "2. small_batch - predicted 1.50x" in text
    page = doctor_html(capped)
    assert "predicted at least 10x" in page and "predicted 1.50x" in page


def test_the_report_probes_the_threads_only_where_torch_has_more_than_the_cores(monkeypatch) -> None:
    import dataclasses

    from recorded_runs import recorded

    import trainspeed.measure as report_module
    from trainspeed.hardware import detect_hardware
    from trainspeed.report.json import doctor_dict

    hw = detect_hardware()
    cores = hw.cpu.physical_cores or 1
    asked: list[tuple[int, tuple[int, int]]] = []
    monkeypatch.setattr(report_module, "thread_gflops", lambda n, threads: asked.append((n, threads)) or (50.0, 100.0))
    r = recorded(15.0, {"forward": 5.0, "backward": 8.0, "optimizer": 1.0}, ops=55, flops=1e9, threads=cores)
    report = report_module.diagnose_run(r, hardware=hw, dispatch_us=2.0, matmul_gflops=100.0)
    assert asked == [] and doctor_dict(report)["probe"]["threads_matmul_gflops"] is None
    over = dataclasses.replace(r, torch_threads=4 * cores)
    report = report_module.diagnose_run(over, hardware=hw, dispatch_us=2.0, matmul_gflops=100.0)
    assert asked == [(256, (4 * cores, cores))]  # no matrix op timed: a 256 x 256 product
    assert doctor_dict(report)["probe"]["threads_matmul_gflops"] == {"as_run": 50.0, "advised": 100.0}
    assert report.verdicts[0].id == "thread_oversubscription"


def test_the_summary_lists_what_the_dataloader_ran_only_where_the_wait_is_worth_it() -> None:
    from recorded_runs import recorded

    from trainspeed.hardware import detect_hardware
    from trainspeed.measure import diagnose_run
    from trainspeed.watch.result import DataSite, LoaderInfo

    sites = [DataSite("train.py:12", "image = resize(image)", 30, 0.6),
             DataSite("torch/utils/data/_utils/collate.py:collate", "", 20, 0.4,
                      machinery="collating samples into a batch")]

    def rendered(data_ms: float) -> tuple[str, str]:
        r = recorded(20.0, {"data": data_ms, "forward": 8.0, "backward": 8.0, "optimizer": 1.0}, flops=2e8, batch=64,
                     loaders=[LoaderInfo(0, False, 64, False)])
        report = diagnose_run(dataclasses.replace(r, data_sites=sites), hardware=detect_hardware(), dispatch_us=2.0,
                              matmul_gflops=100.0)
        return _rendered(report), doctor_html(report)

    text, page = rendered(3.0)
    assert "data wait in train.py:12 (60% of 50 samples): image = resize(image)" in text
    assert "data wait in torch/utils/data/_utils/collate.py:collate (40% of 50 samples) (collating samples" in text
    text, page = rendered(0.2)  # 1% of the run: not worth the summary's lines, still in the HTML report
    assert "data wait in" not in text and "Waiting on the DataLoader, by what it ran" in page
    assert "<code>image = resize(image)</code>" in page and "collating samples into a batch" in page


def test_the_matmul_rate_is_read_again_after_the_other_probes(monkeypatch) -> None:
    """A reading taken while another tenant held a core (the one-thread rate at two threads) is not the CPU's rate:
    launch_bound would count the arithmetic at half the speed the run's ops had."""
    from recorded_runs import recorded

    import trainspeed.measure as report_module
    from trainspeed.hardware import detect_hardware

    readings = iter([104.0, 104.0, 194.0, 190.0])  # before the hardware's detection, before and after the other probes, once more
    monkeypatch.setattr(report_module, "cpu_matmul_gflops", lambda: next(readings))
    r = recorded(0.7, {"forward": 0.14, "backward": 0.24, "optimizer": 0.29}, ops=100, flops=20e6)
    hardware = detect_hardware()
    monkeypatch.setattr(report_module, "detect_hardware", lambda: hardware)
    report = report_module.diagnose_run(r, dispatch_us=1.15, thread_rates=(1.0, 1.0))
    assert report.context.matmul_gflops == 194.0
    assert report.verdicts[0].id == "launch_bound"


def test_the_summary_says_the_recompute_the_compiles_and_what_the_workers_ran() -> None:
    from recorded_runs import recorded

    import trainspeed.measure as report_module
    from trainspeed.hardware import detect_hardware
    from trainspeed.watch.result import Compiles, LoaderInfo, WorkerCpu

    r = recorded(30.0, {"data": 10.0, "forward": 5.0, "backward": 12.0, "optimizer": 2.0}, ops=100, flops=1e8,
                 loaders=[LoaderInfo(1, False, 32, False, batches=120)])
    r = dataclasses.replace(r, recompute_ms_per_step=4.25, loader_workers=WorkerCpu(94, 9.5), compiles=Compiles(2, 0.5))
    text = _rendered(report_module.diagnose_run(r, hardware=detect_hardware(), dispatch_us=2.0, matmul_gflops=100.0))
    assert "backward recomputes checkpointed forwards (activation checkpointing): 4.25 ms per step" in text
    assert "DataLoader worker processes: 94 batches while measured, 9.50 ms of CPU each" in text
    assert "torch.compile: 2 graph(s) compiled while the steps were measured, 0.50 s" in text
