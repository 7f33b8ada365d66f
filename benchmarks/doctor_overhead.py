"""The figures behind BENCHMARKS.md's doctor-overhead table: watched vs unwatched vs torch.profiler.

    python benchmarks/doctor_overhead.py
    python benchmarks/doctor_overhead.py --loops iris --rounds 7 --arms plain,trainspeed.watch
    python benchmarks/doctor_overhead.py --device cuda --iris-steps 10000 --arms plain,trainspeed.watch
    python benchmarks/doctor_overhead.py --loops iris --arms plain,trainspeed.watch,trainspeed.watch:detail_every=16

Two loops: the seed's Iris step (tiny: the worst case for any per-step cost) and an MLP step of
about 10 ms. Each arm runs the same number of steps, arms interleaved (ABCABC...) over several
rounds so drift hits all of them; the table gives the median over rounds and the overhead
relative to the plain loop. An arm `trainspeed.watch:KEY=N;...` watches with those Watcher
arguments (integers), to compare settings. Every run is a fresh process: a torch.profiler session leaves the
process slower for whatever runs after it, so arms sharing a process would not be compared fairly.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch
from bench_common import measured_on
from torch import nn

from trainspeed._io import quiet_fd2
from trainspeed.hardware import detect_hardware
from trainspeed.watch import Watcher
from trainspeed.workloads import load_iris_split, make_iris_mlp


def iris_stepper(device: str = "cpu") -> Callable[[int], None]:
    """The seed's Iris loop around one model and optimizer: call it with a number of steps, as often
    as needed."""
    d = load_iris_split().to(device)
    model = make_iris_mlp(seed=0).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []

    def loop(steps: int) -> None:
        for _ in range(steps):
            loss = criterion(model(d.x_train), d.y_train)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())

    return loop


def iris_loop(steps: int, device: str = "cpu") -> None:
    iris_stepper(device)(steps)


def mlp_stepper(device: str = "cpu") -> Callable[[int], None]:
    """The ~10 ms-step MLP loop (512 -> 1024 -> 1024 -> 10, batch 256) around one model and optimizer: call
    it with a number of steps, as often as needed."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(256, 512, device=device), torch.randint(0, 10, (256,), device=device)

    def loop(steps: int) -> None:
        for _ in range(steps):
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss.item()

    return loop


def mlp_loop(steps: int, device: str = "cpu") -> None:
    mlp_stepper(device)(steps)


def timed(run: Callable[[], None], device: str) -> float:
    """Seconds of `run()`, the device's queue drained before both clock reads."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    run()
    sync()
    return time.perf_counter() - t0


ARMS = ("plain", "trainspeed.watch", "torch.profiler")


def watcher_args(arm: str) -> dict[str, int] | None:
    """The Watcher arguments of a `trainspeed.watch:KEY=N;...` arm ({} for plain trainspeed.watch);
    None if `arm` is no watcher arm. ValueError for a malformed one."""
    name, _, spec = arm.partition(":")
    if name != "trainspeed.watch":
        return None
    kwargs: dict[str, int] = {}
    for part in filter(None, spec.split(";")):
        key, eq, value = part.partition("=")
        if not eq or key not in ("detail_every", "warmup", "profile_steps"):
            raise ValueError(f"bad watcher setting {part!r} in arm {arm!r} (detail_every, warmup or profile_steps)")
        try:
            kwargs[key] = int(value)
        except ValueError:
            raise ValueError(f"{key} must be an integer, got {value!r} in arm {arm!r}") from None
    return kwargs


def arms(loop: Callable[[int], None], steps: int, arm: str) -> Callable[[], None]:
    def plain() -> None:
        loop(steps)

    def watched() -> None:
        with Watcher(**(watcher_args(arm) or {})):  # type: ignore[arg-type]
            loop(steps)

    def profiled() -> None:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_initialized():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with quiet_fd2(), torch.profiler.profile(activities=activities):
            loop(steps)

    return watched if watcher_args(arm) is not None else {"plain": plain, "torch.profiler": profiled}[arm]


LOOPS = {"iris": iris_loop, "mlp": mlp_loop}


def worker(loop_name: str, arm: str, steps: int, device: str) -> None:
    """One run in this fresh process: a warm-up, then the timed arm; prints its seconds."""
    def loop(n: int) -> None:
        LOOPS[loop_name](n, device)

    loop(max(1, steps // 10))  # first-call costs, untimed
    print(timed(arms(loop, steps, arm), device))


def run_fresh(loop_name: str, arm: str, steps: int, device: str) -> float:
    out = subprocess.run([sys.executable, __file__, "--worker", loop_name, arm, str(steps), device],
                         check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
        return
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", default="iris,mlp")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--arms", default="plain,trainspeed.watch,torch.profiler")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--iris-steps", type=int, default=20_000, help="steps per run of the seed loop")
    args = parser.parse_args()
    if args.iris_steps < 1:
        parser.exit(2, "doctor_overhead.py: --iris-steps must be at least 1\n")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.exit(2, "doctor_overhead.py: --device cuda, but torch sees no CUDA device\n")
    for arm in args.arms.split(","):
        try:
            known = arm in ARMS or watcher_args(arm) is not None
        except ValueError as e:
            parser.exit(2, f"doctor_overhead.py: {e}\n")
        if not known:
            parser.exit(2, f"doctor_overhead.py: unknown arm {arm!r} (plain, trainspeed.watch[:KEY=N;...], "
                           "torch.profiler)\n")
    hw = detect_hardware()
    where = hw.gpu.gpus[0].name if args.device == "cuda" else "CPU"
    print(f"{measured_on(hw)}, {where}; torch {hw.torch_version}.\n")
    print("| loop | steps | arm | median s | per step | overhead vs plain | each round (s) |")
    print("|---|---:|---|---:|---:|---:|---|")
    mlp_name = "MLP, ~10 ms step" if args.device == "cpu" else "MLP 512-1024-1024-10, batch 256"
    for name, loop, steps in (("seed Iris MLP", "iris", args.iris_steps), (mlp_name, "mlp", 600)):
        if loop not in args.loops.split(","):
            continue
        times: dict[str, list[float]] = {}
        for r in range(args.rounds):
            for arm in args.arms.split(","):
                times.setdefault(arm, []).append(run_fresh(loop, arm, steps, args.device))
                # each run as it ends: a run cut short by a time limit still leaves its figures
                print(f"# {loop} round {r + 1} {arm}: {times[arm][-1]:.3f} s", file=sys.stderr, flush=True)
        base = statistics.median(times["plain"])
        pairs = [w / p - 1 for w, p in zip(times.get("trainspeed.watch", []), times["plain"])]
        for arm, ts in times.items():
            med = statistics.median(ts)
            rounds_s = ", ".join(f"{t:.2f}" for t in ts)
            print(f"| {name} | {steps} | {arm} | {med:.3f} | {med / steps * 1e3:.3f} ms | {(med / base - 1) * 100:+.1f}% "
                  f"| {rounds_s} |")
        if pairs:
            print(f"| {name} | | watched / plain, round by round | | | median {statistics.median(pairs) * 100:+.1f}% | "
                  + ", ".join(f"{x * 100:+.1f}%" for x in pairs) + " |")


if __name__ == "__main__":
    main()
