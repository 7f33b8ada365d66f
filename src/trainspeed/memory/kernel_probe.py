"""Ask the real CPU kernel what it allocates that the meta function does not show.

oneDNN's kernels size their buffers from its layout for this CPU and build (page-aligned parts,
padded and blocked leading dimensions, reorders around a convolution), which no formula here
could follow across versions; the CPU flash-attention kernels size theirs from the thread count,
their block sizes and the layout of the gradients they are given. So for those ops the replay
asks the real kernel: one call on zeros
laid out like the replay's tensors (same shapes and strides: a kernel that copies a
non-contiguous input counts that copy), under the profiler's allocator events, cached per shape.
What it returns beyond the meta outputs is its scratch (peak minus what it kept) and, for
`aten.mkldnn_rnn_layer`, the training workspace it returns (every time step's gates and states,
kept for backward) that its meta function makes empty. Nothing of the model is allocated; a probe
holds one call's inputs (one layer's weights and activations) and is skipped above
PROBE_LIMIT_BYTES, and an attention probe above PROBE_LIMIT_MACS of work (a 7B model's attention
at 2 048 tokens would take seconds; its scratch is then left out and the estimate says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from trainspeed._io import quiet_fd2
from trainspeed.memory.allocations import allocation_peak, profiler_allocations

FORWARD = "aten.mkldnn_rnn_layer.default"
BACKWARD = "aten.mkldnn_rnn_layer_backward.default"
CONV = "aten.convolution.default"
CONV_BACKWARD = "aten.convolution_backward.default"
ATTENTION = "aten._scaled_dot_product_flash_attention_for_cpu.default"
ATTENTION_BACKWARD = "aten._scaled_dot_product_flash_attention_for_cpu_backward.default"
MATMULS = ("aten.mm.default", "aten.addmm.default", "aten.bmm.default", "aten.baddbmm.default")
PROBE_LIMIT_BYTES = 256 * 2**20
PROBE_LIMIT_MACS = 2**30


@dataclass(frozen=True)
class Probe:
    workspace_bytes: int
    """The forward's workspace output (0 for the backward)."""
    scratch_bytes: int
    """Peak bytes the call allocated beyond what it returned (freed before it returned)."""


_probed: dict[tuple[Any, ...], Probe | None] = {}


def _shape_key(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    def key(a: Any) -> Any:
        return ((tuple(a.shape), a.stride(), a.dtype) if isinstance(a, torch.Tensor) else
                tuple(a) if isinstance(a, list) else a)
    # per-thread buffers: the same call with another thread count allocates another amount
    return (op, torch.get_num_threads()) + tuple(key(a) for a in args) + tuple((k, key(v)) for k, v in kwargs.items())


def _overload(op: str) -> Any:
    """torch.ops.aten.<name>.<overload> from its printed name, "aten.<name>.<overload>"."""
    namespace, name, overload = op.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), name), overload)


def _macs(op: str, args: tuple[Any, ...]) -> int:
    """Multiply-adds of one call of a probed op whose cost grows faster than its inputs (attention:
    batch x heads x queries x keys x head size; a matrix product: its m x k x n per batch), 0 for others."""
    if op in (ATTENTION, ATTENTION_BACKWARD):
        q, k = (args[0], args[1]) if op == ATTENTION else (args[1], args[2])
        return int(q.numel()) * int(k.shape[-2])
    if op in MATMULS:
        a, b = (args[0], args[1]) if op in ("aten.mm.default", "aten.bmm.default") else (args[1], args[2])
        return int(a.numel()) * int(b.shape[-1])
    return 0


def _zeros(a: Any) -> Any:
    """Zeros laid out like `a` (same strides: a kernel copies a non-contiguous input, and that counts)."""
    if not isinstance(a, torch.Tensor):
        return a
    return torch.empty_strided(tuple(a.shape), a.stride(), dtype=a.dtype).zero_()


def _scratch_of(call: Any) -> tuple[Any, int]:
    """Run `call()` under the allocator events; its result and its peak minus what it kept."""
    with quiet_fd2(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                             profile_memory=True) as prof:
        out = call()
    events = profiler_allocations(prof)
    kept = sum(delta for _, delta in events)
    return out, max(allocation_peak(events) - kept, 0)


def _forward(real: tuple[Any, ...]) -> Any:
    return torch.ops.aten.mkldnn_rnn_layer.default(*real)


def _run(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Probe:
    real = tuple(_zeros(a) for a in args)
    if op not in (FORWARD, BACKWARD):  # an op whose only hidden bytes are its scratch
        real_kwargs = {k: _zeros(v) for k, v in kwargs.items()}
        _, scratch = _scratch_of(lambda: _overload(op)(*real, **real_kwargs))
        return Probe(0, scratch)
    if op == FORWARD:
        out, scratch = _scratch_of(lambda: _forward(real))
        ws = out[3]
        if not isinstance(ws, torch.Tensor):
            raise RuntimeError("the kernel returned no workspace")
        return Probe(ws.numel() * ws.element_size(), scratch)
    # backward: a real forward first, for the output, states and workspace it consumes
    (inp, w1, w2, w3, w4, hx, cx, _out, _hy, _cy, g_out, g_hy, g_cy, reverse, mode, hidden, layers, biases, train,
     bidir, sizes, batch_first, _ws) = real
    output, hy, cy, ws = _forward((inp, w1, w2, w3, w4, hx, cx, reverse, sizes, mode, hidden, layers, biases, bidir,
                                   batch_first, train))
    back = (inp, w1, w2, w3, w4, hx, cx, output, hy, cy, g_out, g_hy, g_cy, reverse, mode, hidden, layers, biases,
            train, bidir, sizes, batch_first, ws)
    _, scratch = _scratch_of(lambda: torch.ops.aten.mkldnn_rnn_layer_backward.default(*back))
    return Probe(0, scratch)


def probe(op: str, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> Probe | None:
    """What the real CPU kernel of this call uses beyond its meta outputs (FORWARD's workspace, and
    any op's scratch); None where it cannot be asked (the kernel fails on this CPU, as a bf16 LSTM
    without AVX-512 does, or the probe is too large)."""
    kwargs = kwargs or {}
    key = _shape_key(op, args, kwargs)
    if key in _probed:
        return _probed[key]
    result: Probe | None = None
    size = sum(a.numel() * a.element_size() for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))
    if size <= PROBE_LIMIT_BYTES and _macs(op, args) <= PROBE_LIMIT_MACS:
        from torch.utils._python_dispatch import _disable_current_modes

        # real tensors, outside the replay; grad mode on (backward runs without it, and the
        # forward kernel returns no workspace then)
        with _disable_current_modes(), torch.enable_grad():
            try:
                result = _run(op, args, kwargs)
            except Exception:  # noqa: BLE001 - the real step fails the same way; the estimate says so
                result = None
    _probed[key] = result
    return result
