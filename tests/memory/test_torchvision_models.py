"""The memory estimate on torchvision's ResNet-50 and ViT-B/16 (the `torchvision` extra).

PyPI's torchvision imports only beside PyPI's torch of its release; beside another build (the CPU
torch CI installs) it raises on import, and these tests skip.
"""

from __future__ import annotations

import pytest

from trainspeed.memory import estimate_memory, measure_memory

try:
    import torchvision  # noqa: F401
except Exception as e:  # noqa: BLE001 - ImportError, or RuntimeError from a torch build it was not made for
    pytest.skip(f"torchvision is not importable here: {type(e).__name__}", allow_module_level=True)

from trainspeed.workloads.vision_models import small_vision_models  # noqa: E402


@pytest.mark.parametrize("amp", [None, "bf16"])
@pytest.mark.parametrize("name", ["resnet50", "vit_b_16"])
def test_a_torchvision_model_is_estimated_to_its_measured_peak(name: str, amp: str | None) -> None:
    model = small_vision_models()[name]
    est = estimate_memory(model.build, model.images, 8, optimizer="adamw", amp=amp)
    real = measure_memory(model.build, model.images, 8, optimizer="adamw", amp=amp)
    assert est.total_bytes == pytest.approx(real.peak_bytes, rel=0.005)
