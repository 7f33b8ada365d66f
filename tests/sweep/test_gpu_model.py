import pytest

from trainspeed.errors import UsageError
from trainspeed.sweep.gpu_model import EFFICIENCY, KERNEL_MIN_US, LAUNCH_US, reference_gpu


def test_small_steps_are_host_bound_and_big_ones_device_bound():
    gpu = reference_gpu("RTX 3080", dispatch_us=2.0)
    assert gpu.name == "RTX 3080" and gpu.fp32_tflops == pytest.approx(29.8)
    assert gpu.step_s(100, 1e6) == pytest.approx(100 * (2.0 + LAUNCH_US) * 1e-6)
    flops = 1e12
    assert gpu.step_s(100, flops) == pytest.approx(flops / (29.8e12 * EFFICIENCY) + 100 * KERNEL_MIN_US * 1e-6)
    assert "predicted" in gpu.describe()


def test_unknown_gpu_is_a_usage_error():
    with pytest.raises(UsageError, match="no FP32 peak"):
        reference_gpu("Voodoo 5", 1.0)
