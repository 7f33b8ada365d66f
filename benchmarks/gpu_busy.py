"""The doctor's GPU busy time per step against torch.profiler's own kernel sum, on one CUDA loop.

    python benchmarks/gpu_busy.py --loop iris --steps 600
    python benchmarks/gpu_busy.py --loop wide --steps 60

The doctor reads `gpu_busy_ms` per step from its profiler window (the union of the kernels', copies' and
memsets' device intervals, a few steps after the warm-up). Here the same loop, in the same process, is then run
under a plain torch.profiler over `--steps` steps, and the device time of its kernels is summed as the
profiler's own table sums its "Self CUDA time total" (each device event's self time, user annotations left out). Kernels
that overlap on two streams would count twice in the sum and once in the union; these loops use one stream.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from bench_common import measured_on
from torch import nn
from torch.autograd import DeviceType

from trainspeed._io import quiet_fd2
from trainspeed.hardware import detect_hardware
from trainspeed.watch import Watcher
from trainspeed.workloads import load_iris_split, make_iris_mlp


def iris(device: str) -> Callable[[], None]:
    d = load_iris_split().to(device)
    model = make_iris_mlp(seed=0).to(device)
    criterion, optimizer = nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        loss = criterion(model(d.x_train), d.y_train)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def wide(device: str, width: int = 4096) -> Callable[[], None]:
    """examples/wide_mlp.py's step at batch = width, bf16 autocast."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                          nn.Linear(width, 10)).to(device)
    criterion, optimizer = nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(width, 1024, device=device), torch.randint(0, 10, (width,), device=device)

    def step() -> None:
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop", choices=("iris", "wide"), default="iris")
    parser.add_argument("--steps", type=int, default=600)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.exit(2, "gpu_busy.py: needs a CUDA device\n")
    step = {"iris": iris, "wide": wide}[args.loop]("cuda")
    with Watcher() as watcher:
        for _ in range(args.steps):
            step()
    result = watcher.measurements()
    torch.cuda.synchronize()
    with quiet_fd2(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA,
                                                         torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
    kernel_us = sum(e.self_device_time_total for e in prof.key_averages()
                    if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False))
    profiler_ms = kernel_us / 1e3 / args.steps
    print(measured_on(detect_hardware(), "cuda"))
    print(f"loop {args.loop}, {args.steps} steps; doctor: median step {result.steps.median_ms:.3f} ms, "
          f"gpu_busy_ms {result.window.gpu_busy_ms_per_step:.4f} per step, kernels {result.window.kernels_per_step}")
    print(f"torch.profiler's Self CUDA time total: {profiler_ms:.4f} ms per step")
    if result.window.gpu_busy_ms_per_step:
        print(f"doctor / profiler: {result.window.gpu_busy_ms_per_step / profiler_ms:.3f}")


if __name__ == "__main__":
    main()
