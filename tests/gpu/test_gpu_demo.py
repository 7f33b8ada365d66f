"""On a real CUDA device: the hardware report and the demo's CUDA rows."""

from __future__ import annotations

import pytest
import torch

from trainspeed.demo import run_demo
from trainspeed.hardware import detect_hardware

pytestmark = pytest.mark.gpu


def test_hw_lists_the_gpu() -> None:
    report = detect_hardware()
    assert report.gpu.cuda_available and report.gpu.gpus
    g = report.gpu.gpus[0]
    assert g.torch_usable and g.vram_total_bytes and g.compute_capability and g.architecture


def test_demo_on_cuda_counts_syncs_and_agrees() -> None:
    result = run_demo(["cuda"], epochs=300)
    syncs = {r.variant: r.syncs for r in result.runs}
    assert syncs == {"seed": 303, "record_every_200": 4, "no_record": 0, "sync_free": 1, "fit": 1}
    assert len({r.final_loss for r in result.runs}) == 1
    seed, free = result.run("cuda", "seed"), result.run("cuda", "sync_free")
    assert seed.losses == free.losses
    assert torch.cuda.is_available()
