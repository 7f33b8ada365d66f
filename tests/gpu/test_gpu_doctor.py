"""On a real CUDA device: the doctor's device times, kernel counts and the seed's verdicts."""

from __future__ import annotations

import pytest

from trainspeed.demo.doctor_section import doctor_on_seed

pytestmark = pytest.mark.gpu


def test_seed_loop_on_cuda() -> None:
    report = doctor_on_seed("cuda", 500)
    w = report.watch
    assert w.device == "cuda" and w.phases["forward"].device_ms is not None
    assert w.kernels_per_step and w.kernels_per_step > 5
    # a few us per tiny kernel: the GPU idles most of the step while the host launches
    assert w.gpu_busy_ms_per_step is not None and 0 < w.gpu_busy_ms_per_step < 0.5 * w.median_ms
    assert report.context.cuda_op_us is not None and report.context.cuda_op_us > report.context.dispatch_us
    ids = [v.id for v in report.verdicts]
    assert "launch_bound" in ids and "compute_bound" not in ids
