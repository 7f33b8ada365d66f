"""Whether the doctor's profiler window leaves a CUDA process slower after it closes.

    python benchmarks/cupti_teardown.py            # needs CUDA
    python benchmarks/cupti_teardown.py --steps 3000 --rounds 3

torch.profiler with CUDA activity attaches NVIDIA's CUPTI; unless TEARDOWN_CUPTI=1, Kineto leaves
it attached when the profiler stops, and its callbacks stay on every later CUDA call. Each arm is a
fresh process running the seed's Iris loop on the GPU: `--steps` steps timed, then the doctor's
profiler window (trainspeed.watch.profile_window.ProfileWindow, 3 steps), then `--steps` steps
timed again. Arms: the window as the doctor runs it (it sets TEARDOWN_CUPTI=1 around the
profiler's stop); the same with TEARDOWN_CUPTI=0 in the environment (which the window leaves
alone): what the window cost before it detached CUPTI; and no window at all, the same 4 steps run
plain (the control: how much the second block differs from the first with no profiler in
between). Per step, the device synchronised around each timed block.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def worker(steps: int, with_window: bool) -> None:
    import torch
    from doctor_overhead import iris_stepper

    from trainspeed.watch.profile_window import ProfileWindow

    loop = iris_stepper("cuda")
    loop(500)

    def per_step() -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loop(steps)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / steps * 1e6

    before = per_step()
    window = ProfileWindow(3)
    for index in range(4):  # opens as step 0 ends, profiles steps 1-3, closes as step 3 ends
        loop(1)
        if with_window:
            window.on_step_end(index, warmup=1, cuda=True)
    assert window.kernels_per_step or not with_window, window.notes
    loop(100)
    print(before, per_step())


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker(int(sys.argv[2]), sys.argv[3] == "window")
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        parser.exit(2, "cupti_teardown.py: needs a CUDA device\n")
    if args.steps < 1 or args.rounds < 1:
        parser.exit(2, "cupti_teardown.py: --steps and --rounds must be at least 1\n")
    arms = {"window, CUPTI detached (the doctor's default)": (None, "window"),
            "window, TEARDOWN_CUPTI=0": ("0", "window"),
            "no window (control)": (None, "none")}
    results: dict[str, list[tuple[float, float]]] = {arm: [] for arm in arms}
    for _ in range(args.rounds):
        for arm, (value, kind) in arms.items():
            env = {k: v for k, v in os.environ.items() if k != "TEARDOWN_CUPTI"}
            if value is not None:
                env["TEARDOWN_CUPTI"] = value
            out = subprocess.run([sys.executable, __file__, "--worker", str(args.steps), kind], env=env, check=True,
                                 capture_output=True, text=True).stdout.split()
            results[arm].append((float(out[-2]), float(out[-1])))
            print(f"# {arm}: {out[-2]} -> {out[-1]} us per step", file=sys.stderr, flush=True)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}; seed Iris loop, {args.steps} steps per block\n")
    print("| arm | before the window, us/step | after it, us/step | after / before (median of rounds) |")
    print("|---|---:|---:|---:|")
    for arm, pairs in results.items():
        before = statistics.median(b for b, _ in pairs)
        after = statistics.median(a for _, a in pairs)
        ratio = statistics.median(a / b for b, a in pairs)
        print(f"| {arm} | {before:.1f} | {after:.1f} | {(ratio - 1) * 100:+.1f}% |")


if __name__ == "__main__":
    main()
