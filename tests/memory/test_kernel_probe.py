"""Asking the real CPU kernel: the LSTM workspace and scratch, the cache, and the way out."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from trainspeed.memory import kernel_probe


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_probe, "_probed", {})


def _lstm_args(mode: FakeTensorMode | None, t: int = 12, n: int = 3, i: int = 5, h: int = 7) -> tuple:
    def z(*shape):  # noqa: ANN202
        return torch.zeros(*shape)
    if mode is not None:
        with mode:
            tensors = [z(t, n, i), z(4 * h, i), z(4 * h, h), z(4 * h), z(4 * h), z(n, h), z(n, h)]
    else:
        tensors = [z(t, n, i), z(4 * h, i), z(4 * h, h), z(4 * h), z(4 * h), z(n, h), z(n, h)]
    return (*tensors, False, [], 2, h, 1, True, False, False, True)


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="oneDNN is not in this build")
def test_lstm_workspace_is_the_real_kernels() -> None:
    real = torch.ops.aten.mkldnn_rnn_layer.default(*_lstm_args(None))[3]
    found = kernel_probe.probe(kernel_probe.FORWARD, _lstm_args(FakeTensorMode()))
    assert found is not None and found.workspace_bytes == real.numel() * real.element_size() > 0
    assert found.scratch_bytes >= 0


def test_probes_are_cached_per_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def run(op, args, kwargs):  # noqa: ANN001, ANN202
        calls.append(op)
        return kernel_probe.Probe(4096, 128)

    monkeypatch.setattr(kernel_probe, "_run", run)
    args = _lstm_args(FakeTensorMode())
    assert kernel_probe.probe(kernel_probe.FORWARD, args) == kernel_probe.Probe(4096, 128)
    assert kernel_probe.probe(kernel_probe.FORWARD, args) == kernel_probe.Probe(4096, 128)
    kernel_probe.probe(kernel_probe.FORWARD, _lstm_args(FakeTensorMode(), n=4))
    assert calls == [kernel_probe.FORWARD, kernel_probe.FORWARD]  # once per shape


def test_a_kernel_that_fails_or_a_probe_too_large_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(op, args, kwargs):  # noqa: ANN001, ANN202
        raise RuntimeError("could not create a primitive descriptor for the LSTM forward")

    monkeypatch.setattr(kernel_probe, "_run", fail)
    assert kernel_probe.probe(kernel_probe.FORWARD, _lstm_args(FakeTensorMode())) is None
    monkeypatch.setattr(kernel_probe, "PROBE_LIMIT_BYTES", 100)
    monkeypatch.setattr(kernel_probe, "_run", lambda op, args: pytest.fail("probed above the limit"))
    assert kernel_probe.probe(kernel_probe.FORWARD, _lstm_args(FakeTensorMode(), t=20)) is None


def test_zeros_keep_the_layout() -> None:
    with FakeTensorMode():
        x = torch.zeros(4, 6).t()
    z = kernel_probe._zeros(x)
    assert not isinstance(z, type(x)) and z.shape == x.shape and z.stride() == x.stride() and not z.any()


def test_cuda_attention_kernels_are_probed_whatever_their_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the GPU a probe of attention takes milliseconds: the work limit that keeps a CPU probe short is not
    applied to it (a 7B model's attention at 2 048 tokens is still sized), the bytes limit is."""
    monkeypatch.setattr(kernel_probe, "PROBE_LIMIT_MACS", 1)
    monkeypatch.setattr(kernel_probe, "_run", lambda op, args, kwargs: kernel_probe.Probe(0, 3 * 2**20))
    with FakeTensorMode():
        q = torch.zeros(2, 4, 64, 16)
    flash_backward = "aten._scaled_dot_product_flash_attention_backward.default"
    assert flash_backward in kernel_probe.CUDA_ATTENTION
    assert kernel_probe.probe(flash_backward, (q, q, q, q, q)) == kernel_probe.Probe(0, 3 * 2**20)
    assert kernel_probe.probe(kernel_probe.ATTENTION, (q, q, q)) is None  # the CPU kernel: over the limit
    assert kernel_probe._macs(flash_backward, (q, q, q, q, q)) == q.numel() * 64


def test_a_meta_argument_goes_to_the_calls_device() -> None:
    """Flash attention's meta function puts the dropout seed and offset on the meta device; the probe gives them
    the call's device (a meta argument would send the call to the meta kernels), unfilled where the dtype has no
    fill kernel."""
    seed = torch.empty(2, dtype=torch.uint64, device="meta")
    moved = kernel_probe._zeros(seed, torch.device("cpu"))
    assert moved.device.type == "cpu" and moved.dtype == torch.uint64 and moved.shape == (2,)
    assert kernel_probe._zeros(torch.empty(3, device="meta")).device.type == "meta"  # no device given: kept
