"""On a real CUDA device: the doctor's device times, kernel counts and the seed's verdicts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainspeed.demo.doctor_section import doctor_on_seed

pytestmark = pytest.mark.gpu


def test_seed_loop_on_cuda() -> None:
    report = doctor_on_seed("cuda", 500)
    w = report.watch
    assert w.model.device == "cuda" and w.phases["forward"].device_ms is not None
    assert w.window.kernels_per_step and w.window.kernels_per_step > 5
    # a few us per tiny kernel: the GPU idles most of the step while the host launches
    assert w.window.gpu_busy_ms_per_step is not None and 0 < w.window.gpu_busy_ms_per_step < 0.5 * w.steps.median_ms
    assert report.context.cuda_op_us is not None and report.context.cuda_op_us > report.context.dispatch_us
    ids = [v.id for v in report.verdicts]
    assert "launch_bound" in ids and "compute_bound" not in ids


def _mlp_flops(batch: int, width: int) -> float:
    """examples/wide_mlp.py's matrix FLOPs per step, by hand: forward, the weights' gradients (as many again), and
    the inputs' gradients of the second and third layers (the first layer's input needs none)."""
    forward = 2 * batch * (1024 * width + width * width + width * 10)
    return 2 * forward + 2 * batch * (width * width + width * 10)


def test_matmul_heavy_step_reports_its_flop_rate(tmp_path: Path) -> None:
    out = tmp_path / "wide.json"
    # at 8192 an H200's step is 91% kernels (6.2 ms); at 4096 the host's 2 ms of launches matched the GPU's work
    # and no verdict applied (2026-11-27)
    batch = width = 8192
    run = subprocess.run([sys.executable, "-m", "trainspeed", "doctor", "--json", str(out), "examples/wide_mlp.py",
                          "--device", "cuda", "--batch", str(batch), "--width", str(width), "--bf16", "--steps", "200"],
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["verdicts"][0]["id"] == "compute_bound"
    # the profiler's FLOP formulas against the hand count (the loss and the bias adds are not matrix FLOPs)
    assert doc["per_step"]["flops"] == pytest.approx(_mlp_flops(batch, width), rel=0.02)
    rate = doc["flop_rate"]
    assert rate["math"] == "bf16/fp16" and 0.02 < rate["share"] <= 1.0
    assert rate["tflops"] == pytest.approx(doc["per_step"]["flops"] / (doc["steps"]["median_ms"] * 1e-3) / 1e12)
    assert "model-FLOP utilisation" in doc["verdicts"][0]["evidence"]


def test_lightning_s_closure_leaves_the_optimizer_its_own_kernels(tmp_path: Path) -> None:
    """Lightning runs training_step and backward inside optimizer.step(closure): the optimizer's device span
    stops while the closure runs (it held them, 3.41 ms against forward and backward's 1.39, on 2026-11-27)."""
    pytest.importorskip("lightning")
    out = tmp_path / "lightning.json"
    run = subprocess.run([sys.executable, "-m", "trainspeed", "doctor", "--json", str(out),
                          "examples/frameworks/lightning_trainer.py", "--device", "cuda"],
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    phases = json.loads(out.read_text())["phases"]
    assert phases["optimizer"]["device_ms"] < phases["forward"]["device_ms"] + phases["backward"]["device_ms"]


def test_a_short_gpu_bound_run_is_timed_at_the_gpu_s_pace(tmp_path: Path) -> None:
    """60 steps of the wide MLP in float32, nothing in the loop waiting for the device: on the H200 of 2026-11-28 the
    host's median step was 29 ms where the GPU worked 70.5 ms a step, its launches running ahead into CUDA's queue."""
    out = tmp_path / "wide.json"
    run = subprocess.run([sys.executable, "-m", "trainspeed", "doctor", "--steps", "60", "--json", str(out),
                          "examples/wide_mlp.py", "--device", "cuda", "--batch", "8192", "--width", "8192",
                          "--steps", "200"], capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    doc = json.loads(out.read_text())
    steps, busy = doc["steps"], doc["per_step"]["gpu_busy_ms"]
    assert busy <= 1.05 * steps["median_ms"]  # the GPU cannot work longer than the step
    assert doc["flop_rate"]["share"] <= 1.0
    assert steps["host_median_ms"] is None or steps["host_median_ms"] < steps["median_ms"]
