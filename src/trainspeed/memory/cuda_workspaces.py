"""The bytes cuBLAS holds on a CUDA device for a training step: measured where CUDA is, else modelled.

cuBLAS keeps one workspace per (handle, stream), allocated through the caching allocator at its
first matmul and kept, so it is part of max_memory_allocated. Handles belong to threads, and the
autograd engine runs a CUDA backward on a device thread of its own: a step with matmuls in both
forward and backward holds two workspaces. cuBLASLt (the biased matmul, `addmm`) may hold a
further one of its own, depending on the PyTorch build.

Measured on a device: `measure_workspaces` frees the workspaces, runs a tiny matmul here, a tiny
biased one, and a tiny backward, and reads what each added. Modelled without one: sizes from
PyTorch's aten/src/ATen/cuda/CublasHandlePool.cpp (parseChosenWorkspaceSize: ":4096:8" KiB on
sm90, ":4096:2:16:8" elsewhere, or the CUBLAS_WORKSPACE_CONFIG override; CUBLASLT_WORKSPACE_SIZE
KiB, default 1024, for cuBLASLt), which is what torch 2.11 (CUDA 13) did on an H100.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import torch

MATMUL_OPS = frozenset({"aten.mm.default", "aten.addmm.default", "aten.bmm.default", "aten.baddbmm.default",
                        "aten.addbmm.default", "aten.addmv.default", "aten.mv.default"})
BIASED_MATMUL_OPS = frozenset({"aten.addmm.default", "aten._addmm_activation.default"})


def cublas_workspace_bytes(capability: tuple[int, int] | None, config: str | None = None) -> int:
    """The cuBLAS workspace PyTorch allocates on a device of this compute capability."""
    config = os.environ.get("CUBLAS_WORKSPACE_CONFIG") if config is None else config
    if config:
        pairs = re.findall(r":([0-9]+):([0-9]+)", config)
        if pairs:
            return sum(int(size) * 1024 * int(count) for size, count in pairs)
    if capability == (9, 0):
        return 4096 * 1024 * 8
    return 4096 * 1024 * 2 + 16 * 1024 * 8


def cublaslt_workspace_bytes(config: str | None = None) -> int:
    """The cuBLASLt workspace (CUBLASLT_WORKSPACE_SIZE, in KiB; 1024 unless set)."""
    config = os.environ.get("CUBLASLT_WORKSPACE_SIZE") if config is None else config
    try:
        return int(config) * 1024 if config else 1024 * 1024
    except ValueError:
        return 1024 * 1024


@dataclass(frozen=True)
class Workspaces:
    """Bytes each kind of matmul leaves allocated for the rest of the process."""

    host_thread: int
    """The cuBLAS workspace of the thread that runs forward and the optimizer."""
    biased: int
    """What a first biased matmul (cuBLASLt) adds on that thread: 0 where it shares the cuBLAS one."""
    engine_thread: int
    """The cuBLAS workspace of the autograd engine's device thread, where backward runs."""
    source: str
    """"measured on DEVICE" or "modelled"."""

    def for_step(self, ops_by_phase: dict[str, set[str]]) -> int:
        """The workspaces a step holds, given the ops of each of its phases."""
        outside = set().union(*(ops for phase, ops in ops_by_phase.items() if phase != "backward"))
        backward = ops_by_phase.get("backward", set())
        total = self.host_thread if outside & MATMUL_OPS else 0
        total += self.biased if outside & BIASED_MATMUL_OPS else 0
        return total + (self.engine_thread if backward & MATMUL_OPS else 0)


def modelled_workspaces(capability: tuple[int, int] | None) -> Workspaces:
    size = cublas_workspace_bytes(capability)
    return Workspaces(size, cublaslt_workspace_bytes(), size, "modelled")


def free_cublas_workspaces() -> bool:
    """Free the cuBLAS workspaces of this process (the next matmul on each thread allocates its own
    again); False on a build without the call."""
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is None:
        return False
    clear()
    return True


_MEASURED: dict[int, Workspaces] = {}


def measure_workspaces(device: torch.device) -> Workspaces:
    """What this build's cuBLAS holds on `device`, read off the allocator (once per device and process).

    Call it on real tensors: under a fake-tensor mode nothing is allocated and there is nothing to read."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index in _MEASURED:
        return _MEASURED[index]
    target = torch.device("cuda", index)
    allocated = torch.cuda.memory_allocated

    def added(run) -> int:  # bytes `run` leaves allocated beyond the tensors it returns
        torch.cuda.synchronize(target)
        before = allocated(target)
        kept = run()
        torch.cuda.synchronize(target)
        return allocated(target) - before - sum(t.untyped_storage().nbytes() for t in kept)

    with torch.cuda.device(target):
        # ones, not random numbers: drawing them would move the caller's CUDA generator
        x = torch.ones(64, 64, device=target)  # 16 KiB: a whole number of the allocator's 512-byte blocks
        w = torch.ones(64, 64, device=target, requires_grad=True)
        b = torch.ones(64, device=target)  # 256 bytes, rounded to 512
        torch.cuda.synchronize(target)
        if not free_cublas_workspaces():  # an older build: no way to start from none
            return modelled_workspaces(torch.cuda.get_device_capability(index))
        host = added(lambda: [x @ x])
        biased = added(lambda: [torch.nn.functional.linear(x, x, b)])  # nn.Linear's path

        def backward() -> list[torch.Tensor]:
            (x @ w).sum().backward()
            assert w.grad is not None
            return [w.grad]

        engine = added(backward)
    if min(host, biased, engine) < 0:  # something else freed memory meanwhile: the reading is not one
        return modelled_workspaces(torch.cuda.get_device_capability(index))
    found = Workspaces(host, biased, engine, f"measured on {torch.cuda.get_device_name(index)}")
    _MEASURED[index] = found
    return found


def step_workspaces(device: torch.device, capability: tuple[int, int] | None) -> Workspaces:
    """Measured where `device` is a CUDA device here, else modelled for `capability`."""
    if device.type == "cuda" and torch.cuda.is_available():
        return measure_workspaces(device)
    return modelled_workspaces(capability)
