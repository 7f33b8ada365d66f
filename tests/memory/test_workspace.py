"""The CPU convolution rules: which kernel PyTorch picks decides the scratch bytes."""

from __future__ import annotations

import pytest
import torch

from trainspeed.memory import kernel_probe, workspace
from trainspeed.memory.workspace import cpu_conv_uses_mkldnn, unseen_notes, workspace_bytes


def _meta(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.empty(*shape, dtype=dtype)  # tiny CPU tensors: the rules look at device, shape, dtype


@pytest.fixture
def mkldnn_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.mkldnn, "enabled", True)


def test_batch_one_small_image_takes_the_native_path(mkldnn_on: None) -> None:
    assert not cpu_conv_uses_mkldnn(_meta(1, 3, 32, 32), _meta(16, 3, 3, 3), [1, 1], [1, 1], 1)
    assert cpu_conv_uses_mkldnn(_meta(8, 3, 32, 32), _meta(16, 3, 3, 3), [1, 1], [1, 1], 1)
    assert cpu_conv_uses_mkldnn(_meta(1, 3, 128, 128), _meta(16, 3, 3, 3), [1, 1], [1, 1], 1)


def test_bf16_follows_the_cpu_support(mkldnn_on: None, monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = _meta(8, 3, 32, 32, dtype=torch.bfloat16), _meta(16, 3, 3, 3, dtype=torch.bfloat16)
    monkeypatch.setattr(workspace, "_mkldnn_dtype_ok", lambda dtype: False)
    assert not cpu_conv_uses_mkldnn(x, w, [1, 1], [1, 1], 1)
    monkeypatch.setattr(workspace, "_mkldnn_dtype_ok", lambda dtype: True)
    assert cpu_conv_uses_mkldnn(x, w, [1, 1], [1, 1], 1)


def test_native_path_columns_buffer(mkldnn_on: None) -> None:
    x, w, out = _meta(1, 3, 32, 32), _meta(16, 3, 3, 3), _meta(1, 16, 32, 32)
    args = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    # (N, C_in*kh*kw, H_out*W_out) float32
    assert workspace_bytes("aten.convolution.default", args, out) == 1 * 27 * 1024 * 4


def test_one_by_one_kernel_needs_no_columns(mkldnn_on: None) -> None:
    x, w, out = _meta(1, 3, 8, 8), _meta(4, 3, 1, 1), _meta(1, 4, 8, 8)
    args = (x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    assert workspace_bytes("aten.convolution.default", args, out) == 0


def test_other_ops_have_no_scratch() -> None:
    assert workspace_bytes("aten.relu.default", (), None) == 0
    x = torch.randn(8, 16)
    assert workspace_bytes("aten.mm.default", (x, x.t()), None) == 0  # float32: no oneDNN matmul
    assert unseen_notes({"aten.relu.default"}) == []


@pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(), reason="this CPU has no native bfloat16")
def test_a_bfloat16_matrix_product_holds_onednn_scratch() -> None:
    from trainspeed.memory.kernel_probe import _scratch_of

    a, b = torch.randn(8, 512, dtype=torch.bfloat16), torch.randn(512, 10, dtype=torch.bfloat16)
    _, real = _scratch_of(lambda: torch.mm(a, b))
    assert real > 0
    assert workspace_bytes("aten.mm.default", (a, b), None) == real



@pytest.mark.parametrize(("a", "b", "in_place"), [
    ((64, 256), (64, 256), False),  # a float32 residual plus a bfloat16 branch
    ((64, 256), (256,), False),     # broadcast: the cast is of the smaller input only
    ((64, 256), (64, 256), True),   # a bfloat16 tensor updated in place with float32
])
def test_mixed_dtype_arithmetic_casts_as_the_cpu_kernel_does(a: tuple[int, ...], b: tuple[int, ...],
                                                             in_place: bool) -> None:
    from trainspeed.memory.kernel_probe import _scratch_of

    if in_place:
        x, y = torch.zeros(a, dtype=torch.bfloat16), torch.zeros(b)
        op, name = torch.ops.aten.add_.Tensor, "aten.add_.Tensor"
    else:
        x, y = torch.zeros(a), torch.zeros(b, dtype=torch.bfloat16)
        op, name = torch.ops.aten.add.Tensor, "aten.add.Tensor"
    out, real = _scratch_of(lambda: op(x, y))
    assert real > 0
    assert workspace_bytes(name, (x, y), out) == real


def test_same_dtype_arithmetic_has_no_scratch() -> None:
    x, y = torch.zeros(8, 8), torch.zeros(8, 8)
    assert workspace_bytes("aten.mul.Tensor", (x, y), x * y) == 0


def test_a_cuda_attention_kernels_buffers_are_asked_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = []

    def probe(op, args, kwargs=None):  # noqa: ANN001, ANN202
        asked.append(op)
        return None if "cudnn" in op else kernel_probe.Probe(0, 4096)

    monkeypatch.setattr(kernel_probe, "probe", probe)
    for op in kernel_probe.CUDA_ATTENTION:
        expected = None if "cudnn" in op else 4096  # None: a kernel that could not be run, said in the notes
        assert workspace.cuda_workspace_bytes(op, (), None) == expected
    assert workspace.cuda_workspace_bytes("aten.mm.default", (), None) == 0  # cuBLAS's workspace is counted apart
    assert asked == list(kernel_probe.CUDA_ATTENTION)
    assert "CUDA attention kernel" in workspace.unseen_notes({kernel_probe.CUDA_ATTENTION[0]})[0]
