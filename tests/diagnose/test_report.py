"""The doctor's report object: memory pressure brings the estimator's largest batch."""

from __future__ import annotations

import weakref

import torch
from torch import nn

from trainspeed.diagnose.report import _largest_batch
from trainspeed.report.html import doctor_html
from trainspeed.watch import Watcher


class _FakeWatcher:
    def __init__(self, model: nn.Module) -> None:
        self.model = weakref.ref(model)
        self.input_spec = ([64], torch.float32)
        self.optimizer_kind = "adam"


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
    assert report.watch.steps_seen == 10 and report.dispatch_us > 0 and report.matmul_gflops > 0


def test_a_cuda_report_says_what_device_ms_is_and_how_much_the_gpu_works() -> None:
    from rich.console import Console
    from test_rules import recorded

    from trainspeed.diagnose.report import diagnose_run
    from trainspeed.hardware import detect_hardware
    from trainspeed.report.text import doctor_view

    r = recorded(1.2, {"forward": 0.43, "backward": 0.67, "optimizer": 0.25}, {"forward": 0.42, "backward": 0.66},
                 dev="cuda", ops=28, kernels=21, flops=40800, busy=0.055)
    report = diagnose_run(r, hardware=detect_hardware(), dispatch_us=1.4, matmul_gflops=700, launch_us=14.5)
    console = Console(width=200, record=True)
    console.print(doctor_view(report))
    text = console.export_text()
    assert "the GPU works 0.055 ms of the step, 5%" in text and "idle gaps included" in text
    page = doctor_html(report)
    assert "the GPU works 0.055 ms of the step, 5%" in page and "14.50 us on CUDA" in page
    assert [v.id for v in report.verdicts][:2] == ["launch_bound", "cpu_faster"]
