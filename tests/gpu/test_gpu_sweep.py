"""Sweeps on a real GPU: the device knob measures both sides; CUDA graphs and pinned workers run."""

from __future__ import annotations

import pytest

from trainspeed.sweep import run_sweep

pytestmark = pytest.mark.gpu


def test_device_knob_measures_cuda():
    r = run_sweep("device", "mlp:width=256", steps=20, repeats=2, warmup=2)
    cuda = next(p for p in r.points if p.value == "cuda")
    assert cuda.ok and not cuda.predicted and cuda.ci_low is not None


def test_cuda_graphs_knob_runs_and_records_reads():
    r = run_sweep("cuda-graphs", "mlp:width=256", steps=20, repeats=2, warmup=2, device="cuda")
    assert all(p.ok for p in r.points), [p.error for p in r.points]


def test_record_every_on_cuda_reads_wait_for_queued_work():
    r = run_sweep("record-every", "mlp:width=1024,batch=512", "1,10,never", steps=50, repeats=3, device="cuda")
    assert all(p.ok for p in r.points)
    assert "queued" in r.findings["why"]


def test_pinned_workers_on_cuda():
    r = run_sweep("num-workers", "digits-aug", "0,1+pin", steps=5, repeats=2, device="cuda")
    assert all(p.ok for p in r.points), [p.error for p in r.points]


def test_world_size_on_one_gpu_runs_nccl_under_torchrun():
    import torch

    r = run_sweep("world-size", "mlp:width=256", None, steps=10, repeats=2, warmup=2, device="cuda")
    measured = [p for p in r.points if not p.predicted]
    assert [p.value for p in measured][0] == "1" and all(p.ok for p in measured), [p.error for p in measured]
    if torch.cuda.device_count() > 1:  # with two GPUs: the all-reduce is timed and larger sizes predicted
        assert measured[1].extras["allreduce_ms"] > 0 and any(p.predicted for p in r.points)
