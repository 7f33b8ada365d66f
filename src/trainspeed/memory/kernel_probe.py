"""Ask the real kernel what it allocates that the meta function does not show.

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

On a CUDA target the attention kernels are asked the same way, on the GPU the fake tensors name (milliseconds,
so without the work limit): flash attention's backward keeps float32 accumulators of the query's gradient, the
memory-efficient kernel and cuDNN's a workspace, all from the caching allocator for the call alone.
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
CUDA_ATTENTION = tuple(f"aten._scaled_dot_product_{kernel}_attention{part}.default"
                       for kernel in ("flash", "efficient", "cudnn") for part in ("", "_backward"))
"""The CUDA attention kernels: their buffers (flash's float32 gradient accumulators, the efficient kernel's
workspace, cuDNN's) come from the caching allocator inside the call, beside the outputs the meta functions make."""
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
    devices = tuple(str(a.device) for a in args if isinstance(a, torch.Tensor))
    return (op, torch.get_num_threads(), devices[:1]) + tuple(key(a) for a in args) + tuple((k, key(v)) for k, v in kwargs.items())


def _overload(op: str) -> Any:
    """torch.ops.aten.<name>.<overload> from its printed name, "aten.<name>.<overload>"."""
    namespace, name, overload = op.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), name), overload)


def _macs(op: str, args: tuple[Any, ...]) -> int:
    """Multiply-adds of one call of a probed op whose cost grows faster than its inputs (attention:
    batch x heads x queries x keys x head size; a matrix product: its m x k x n per batch), 0 for others."""
    if op in (ATTENTION, ATTENTION_BACKWARD) or op in CUDA_ATTENTION:
        q, k = (args[1], args[2]) if op.endswith("_backward.default") else (args[0], args[1])
        return int(q.numel()) * int(k.shape[-2])
    if op in MATMULS:
        a, b = (args[0], args[1]) if op in ("aten.mm.default", "aten.bmm.default") else (args[1], args[2])
        return int(a.numel()) * int(b.shape[-1])
    return 0


_UNFILLED = tuple(getattr(torch, name) for name in ("uint16", "uint32", "uint64") if hasattr(torch, name))
"""Dtypes with few kernels (no fill on CUDA): a dropout's random seed and offset, which are left as allocated."""


def _zeros(a: Any, device: torch.device | None = None) -> Any:
    """Zeros laid out like `a` (same strides: a kernel copies a non-contiguous input, and that counts). A tensor
    the meta function put on the meta device (flash attention's random seed and offset) goes to `device`, the
    call's: a meta argument would send the whole call to the meta kernels."""
    if not isinstance(a, torch.Tensor):
        return a
    where = device if a.device.type == "meta" and device is not None else a.device
    t = torch.empty_strided(tuple(a.shape), a.stride(), dtype=a.dtype, device=where)
    return t if a.dtype in _UNFILLED else t.zero_()


def _scratch_of(call: Any, device_type: str = "cpu") -> tuple[Any, int]:
    """Run `call()` under the allocator events of `device_type` (the CUDA caching allocator reports its blocks
    to the profiler too, in their rounded sizes, as max_memory_allocated counts them); its result and its peak
    minus what it kept."""
    with quiet_fd2(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                             profile_memory=True) as prof:
        out = call()
    events = profiler_allocations(prof, device_type)
    kept = sum(delta for _, delta in events)
    return out, max(allocation_peak(events) - kept, 0)


def _forward(real: tuple[Any, ...]) -> Any:
    return torch.ops.aten.mkldnn_rnn_layer.default(*real)


def _without_dropout(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A CUDA attention call with its dropout_p set to 0: the kernel's buffers are the same, a forward with
    dropout would draw from the device's random generator (the user's stream of random numbers, which watching
    must not move), and a backward with dropout reads the seed and offset its forward made, which zeros are not."""
    names = [a.name for a in _overload(op)._schema.arguments]
    if "dropout_p" in kwargs:
        return args, {**kwargs, "dropout_p": 0.0}
    at = names.index("dropout_p") if "dropout_p" in names else len(args)
    return (args[:at] + (0.0,) + args[at + 1:] if at < len(args) else args), kwargs


def _run(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Probe:
    device = next((a.device for a in args if isinstance(a, torch.Tensor) and a.device.type != "meta"), None)
    if op in CUDA_ATTENTION:
        args, kwargs = _without_dropout(op, args, kwargs)
    real = tuple(_zeros(a, device) for a in args)
    if op not in (FORWARD, BACKWARD):  # an op whose only hidden bytes are its scratch
        real_kwargs = {k: _zeros(v, device) for k, v in kwargs.items()}
        _, scratch = _scratch_of(lambda: _overload(op)(*real, **real_kwargs), device.type if device else "cpu")
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
    """What the real kernel of this call (a CPU kernel, or a CUDA attention kernel on the device the fake
    tensors name) uses beyond its meta outputs (FORWARD's workspace, and any op's scratch); None where it
    cannot be asked (the kernel fails here, as a bf16 LSTM without AVX-512 does, or the probe is too large)."""
    kwargs = kwargs or {}
    key = _shape_key(op, args, kwargs)
    if key in _probed:
        return _probed[key]
    result: Probe | None = None
    size = sum(a.numel() * a.element_size() for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))
    if size <= PROBE_LIMIT_BYTES and (op in CUDA_ATTENTION or _macs(op, args) <= PROBE_LIMIT_MACS):
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
