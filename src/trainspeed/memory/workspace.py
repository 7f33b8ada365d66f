"""Buffers a kernel allocates and frees inside one op, which fake tensors cannot see.

Fake tensors run an op's meta function, which creates the outputs only. Some CPU kernels also
allocate scratch space for the length of the op; those bytes count towards the real peak. Each
rule here reproduces one kernel's choice and its buffer, from the PyTorch source it cites.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from trainspeed.memory import kernel_probe


@functools.cache  # the build's answer: asked on every reduced-precision matrix product of a replay
def _mkldnn_dtype_ok(dtype: torch.dtype) -> bool:
    if dtype == torch.bfloat16:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    if dtype == torch.float16:
        return bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
    return False


def cpu_conv_uses_mkldnn(x: torch.Tensor, weight: torch.Tensor, stride: list[int], dilation: list[int],
                         groups: int) -> bool:
    """ConvParams::use_mkldnn (aten/src/ATen/native/Convolution.cpp) for a CPU 2-d convolution."""
    if not torch.backends.mkldnn.is_available() or not torch.backends.mkldnn.enabled:
        return False
    if x.dtype in (torch.bfloat16, torch.float16):
        return _mkldnn_dtype_ok(x.dtype)
    if x.dtype != torch.float32:
        return False
    strided = any(s != 1 for s in stride)
    dilated = any(d != 1 for d in dilation)
    n, c, h, w = x.shape
    kh, kw = weight.shape[-2], weight.shape[-1]
    # "For 1x1 filters, MKLDNN is faster than THNN when multi-threaded, but THNN is faster when single-threaded."
    shape_ok = strided or dilated or n >= 16 or kw != 1 or kh != 1 or torch.get_num_threads() > 1
    # "for some case, native is faster"
    size_ok = groups > 1 or (kw > 3 and kh > 3) or n > 1 or n * c * h * w > 20480
    return shape_ok and size_ok


def _columns_bytes(x: torch.Tensor, weight: torch.Tensor, out_hw: tuple[int, int],
                   stride: list[int], padding: list[int]) -> int:
    """_slow_conv2d_forward_out_cpu's finput: (N, C_in*kh*kw, H_out*W_out) in the input's dtype;
    a 1x1, stride-1, unpadded kernel reads the input directly instead (aten/src/ATen/native/ConvolutionMM2d.cpp)."""
    kh, kw = weight.shape[-2], weight.shape[-1]
    if kh == 1 and kw == 1 and all(s == 1 for s in stride) and all(p == 0 for p in padding):
        return 0
    n, c = x.shape[0], x.shape[1]
    return n * c * kh * kw * out_hw[0] * out_hw[1] * x.element_size()


def _slow_conv2d(x: torch.Tensor, weight: torch.Tensor, stride: list[int], padding: list[int],
                 dilation: list[int], transposed: bool, groups: int) -> bool:
    return (x.device.type == "cpu" and x.dim() == 4 and not transposed and groups == 1
            and all(d == 1 for d in dilation)
            and not cpu_conv_uses_mkldnn(x, weight, stride, dilation, groups))


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _mkldnn_conv2d(x: torch.Tensor, weight: torch.Tensor, stride: list[int], dilation: list[int],
                   transposed: bool, groups: int) -> bool:
    return (x.device.type == "cpu" and x.dim() == 4 and not transposed
            and cpu_conv_uses_mkldnn(x, weight, stride, dilation, groups))


def _conv_forward(args: tuple[Any, ...], out: Any) -> int:
    x, weight, _bias, stride, padding, dilation, transposed, _op, groups = args[:9]
    if _slow_conv2d(x, weight, stride, padding, dilation, transposed, groups):
        return _columns_bytes(x, weight, (out.shape[-2], out.shape[-1]), stride, padding)
    if _mkldnn_conv2d(x, weight, stride, dilation, transposed, groups):
        # oneDNN reorders weight, input and output to its blocked layouts around the kernel: ask it
        found = kernel_probe.probe(kernel_probe.CONV, args)
        return found.scratch_bytes if found is not None else _nbytes(weight) + _nbytes(x) + _nbytes(out)
    return 0


def _conv_backward(args: tuple[Any, ...], out: Any) -> int:
    grad_out, x, weight, _bias_sizes, stride, padding, dilation, transposed, _op, groups = args[:10]
    if _slow_conv2d(x, weight, stride, padding, dilation, transposed, groups):
        # _slow_conv2d_backward_out_cpu rebuilds the columns once for the weight gradient
        return _columns_bytes(x, weight, (grad_out.shape[-2], grad_out.shape[-1]), stride, padding)
    if _mkldnn_conv2d(x, weight, stride, dilation, transposed, groups):
        found = kernel_probe.probe(kernel_probe.CONV_BACKWARD, args)
        return found.scratch_bytes if found is not None else _nbytes(grad_out) + _nbytes(x) + _nbytes(weight)
    return 0


Rule = Callable[[tuple[Any, ...], Any, dict[str, Any]], "int | None"]
"""args, output, kwargs -> scratch bytes; None where the op has scratch that could not be sized."""


def _probed(op: str, when: Callable[[tuple[Any, ...]], bool] = lambda args: True) -> Rule:
    """Scratch of `op` as its real CPU kernel allocates it (kernel_probe), for the calls `when` picks."""
    def rule(args: tuple[Any, ...], out: Any, kwargs: dict[str, Any]) -> int | None:
        if not when(args):
            return 0
        found = kernel_probe.probe(op, args, kwargs)
        return found.scratch_bytes if found is not None else None
    return rule


def _reduced(args: tuple[Any, ...]) -> bool:
    return isinstance(args[0], torch.Tensor) and args[0].dtype in (torch.bfloat16, torch.float16)


def _reduced_matmul(args: tuple[Any, ...]) -> bool:
    factors = [a for a in args[:3] if isinstance(a, torch.Tensor)]  # addmm and baddbmm: the added term first
    a = factors[-1] if factors else None
    return (isinstance(a, torch.Tensor) and a.device.type == "cpu" and a.dtype in (torch.bfloat16, torch.float16)
            and _mkldnn_dtype_ok(a.dtype))


def _promoted_inputs(in_place: bool) -> Rule:
    """TensorIterator on the CPU casts each input whose dtype is not the op's common dtype to a temporary
    of that dtype, and an in-place op whose tensor has another dtype computes into a temporary first
    (TensorIteratorBase::compute_types, "Creates temporaries for CPU operations"; the meta function skips
    them). Under autocast a float32 residual plus a bfloat16 branch is such a call."""
    def rule(args: tuple[Any, ...], out: Any, kwargs: dict[str, Any]) -> int:
        a, b = args[0], args[1]
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.device.type != "cpu":
            return 0
        common = torch.result_type(a, b)
        size = common.itemsize
        scratch = sum(t.numel() * size for t in (a, b) if t.dtype != common)
        if in_place and a.dtype != common:
            scratch += a.numel() * size  # the output computed in the common dtype, then copied into `a`
        return scratch
    return rule


RULES: dict[str, Rule] = {
    "aten.convolution.default": lambda args, out, kwargs: _conv_forward(args, out),
    "aten.convolution_backward.default": lambda args, out, kwargs: _conv_backward(args, out),
    kernel_probe.FORWARD: _probed(kernel_probe.FORWARD),
    kernel_probe.BACKWARD: _probed(kernel_probe.BACKWARD),
    # the CPU flash-attention kernels' per-thread blocks, and a copy of a gradient laid out otherwise
    kernel_probe.ATTENTION: _probed(kernel_probe.ATTENTION),
    kernel_probe.ATTENTION_BACKWARD: _probed(kernel_probe.ATTENTION_BACKWARD),
    # the softmax of scaled_dot_product_attention's math path: masks of the rows that are all -inf
    "aten._safe_softmax.default": _probed("aten._safe_softmax.default"),
    # a bfloat16 or float16 mean over some dimensions sums in float32: a float copy of its input
    "aten.mean.dim": _probed("aten.mean.dim", _reduced),
}
# a bfloat16 or float16 matrix product on a CPU with native support runs oneDNN's matmul, whose
# packed blocks and scratchpad live for the call (about 130 kB for an 8x512 by 512x10 product)
for _name in kernel_probe.MATMULS:
    RULES[_name] = _probed(_name, _reduced_matmul)
for _name in ("add", "sub", "mul", "div"):
    RULES[f"aten.{_name}.Tensor"] = _promoted_inputs(in_place=False)
    RULES[f"aten.{_name}_.Tensor"] = _promoted_inputs(in_place=True)


CUDA_RULES: dict[str, Rule] = {name: _probed(name) for name in kernel_probe.CUDA_ATTENTION}
"""On a CUDA device: the attention kernels' buffers, asked of the kernel on the GPU (the math path's ops are
matrix products and softmaxes, whose outputs are all they allocate besides cuBLAS's workspace, counted apart)."""


def workspace_bytes(op: str, args: tuple[Any, ...], out: Any, kwargs: dict[str, Any] | None = None) -> int | None:
    """Scratch bytes the real CPU kernel of `op` holds during the call (0 when we know of none; None when it
    has some that could not be sized here)."""
    rule = RULES.get(op)
    return rule(args, out, kwargs or {}) if rule is not None else 0


def cuda_workspace_bytes(op: str, args: tuple[Any, ...], out: Any, kwargs: dict[str, Any] | None = None) -> int | None:
    """The same for a real CUDA device: the bytes an attention kernel holds during the call."""
    rule = CUDA_RULES.get(op)
    return rule(args, out, kwargs or {}) if rule is not None else 0


def hidden_outputs(op: str, args: tuple[Any, ...], out: Any) -> list[tuple[torch.Tensor, int]] | None:
    """(output, its real bytes) for outputs the meta function makes smaller than the real kernel
    (oneDNN's LSTM workspace); None when the op has such an output but its size could not be found."""
    if op != kernel_probe.FORWARD:
        return []
    found = kernel_probe.probe(op, args)
    return None if found is None else [(out[3], found.workspace_bytes)]


# Ops whose real CPU kernel keeps memory the replay could not size, and what to tell the user.
UNSEEN = {
    "aten.mkldnn_rnn_layer.default": (
        "nn.LSTM on the CPU runs oneDNN, whose training workspace (kept for backward) could not be "
        "sized by running the real kernel here: expect the real peak above this estimate; --measure "
        "gives the real number"
    ),
    kernel_probe.ATTENTION: (
        "the CPU flash-attention kernel's scratch (per-thread blocks) was too large a call to run "
        "here and is left out: a few MB per thread at most"
    ),
}
UNSEEN[kernel_probe.ATTENTION_BACKWARD] = UNSEEN[kernel_probe.ATTENTION]
for _name in kernel_probe.CUDA_ATTENTION:
    UNSEEN[_name] = ("a CUDA attention kernel could not be run here to size its buffers (its gradient accumulators "
                     "or workspace, freed when it returns): they are left out; --measure gives the real peak")
for _name in kernel_probe.MATMULS:
    UNSEEN[_name] = ("a bfloat16 matrix product was too large a call to run here: oneDNN's scratch for it "
                     "(packed blocks, freed when the product returns) is left out; --measure gives the real peak")


def unseen_notes(ops: set[str]) -> list[str]:
    """Warnings for ops in the replay whose real memory is not modelled (each said once)."""
    return list(dict.fromkeys(text for op, text in UNSEEN.items() if op in ops))
