"""Where the doctor's overhead on the seed loop comes from: the watcher with parts of it switched off.

    python benchmarks/doctor_ablation.py
    python benchmarks/doctor_ablation.py --rounds 10 --steps 5000 --arms plain,default,edges

Steady state only: every run is a fresh process that starts its arm, runs 500 steps untimed (so
warm-up, the op/FLOP window and the first 50 detailed steps are over), then times `--steps` steps.
Arms interleaved round by round; the table gives the median per step and the overhead vs plain.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import torch

EDGES = {"detail_every": 10**9}


Loop = Callable[[int], None]


def _watch(**kw: object) -> Callable[[Loop], None]:
    def start(loop: Loop) -> None:
        from trainspeed.watch import Watcher

        Watcher(**kw).start()  # type: ignore[arg-type]
    return start


def _window_only(loop: Loop) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    from trainspeed.watch.op_counter import OpCounter

    loop(10)
    modes = (OpCounter(), FlopCounterMode(display=False))
    for mode in modes:
        mode.__enter__()
    loop(3)
    for mode in reversed(modes):
        mode.__exit__(None, None, None)


def _hooks_only(loop: Loop) -> None:
    from trainspeed.watch.hooks import Hooks

    class Silent:  # every listener method does nothing
        def __getattr__(self, name: str) -> Callable[..., None]:
            return lambda *a, **k: None

    hooks = Hooks(Silent())  # type: ignore[arg-type]
    hooks.install()
    hooks.pause()


def _wrappers_only(loop: Loop) -> None:
    from trainspeed.watch.syncs import SyncCounter

    SyncCounter().__enter__()


def _idle_thread(loop: Loop) -> None:
    done = threading.Event()
    threading.Thread(target=lambda: done.wait(10_000), daemon=True).start()


def _type_modified(loop: Loop) -> None:
    from trainspeed.watch.syncs import HOST_READ_METHODS

    for name in (*HOST_READ_METHODS, "cuda"):
        setattr(torch.Tensor, name, getattr(torch.Tensor, name))


ARMS: dict[str, tuple[str, Callable[[Loop], None] | None]] = {
    "plain": ("plain loop", None),
    "default": ("default watcher (edges + detailed runs, 50 Hz sampler)", _watch()),
    "edges": ("edges only (no detailed runs)", _watch(**EDGES)),
    "edges-nosampler": ("edges only, sampler off", _watch(**EDGES, sample_hz=1e-4)),
    "edges-bare": ("edges only, sampler and profiler window off", _watch(**EDGES, sample_hz=1e-4, profile_steps=0)),
    "hooks-only": ("every hook installed, listener methods empty", _hooks_only),
    "wrappers-only": ("every read wrapper installed, each read tallied by its line, no callback", _wrappers_only),
    "thread": ("an idle second Python thread", _idle_thread),
    "type-modified": ("torch.Tensor's read methods re-set (type modified, nothing wrapped)", _type_modified),
    "window-only": ("after the CPU op/FLOP window of 3 steps, no watcher", _window_only),
}


def worker(arm: str, steps: int) -> None:
    from doctor_overhead import iris_stepper  # this folder is on sys.path: the script runs from it

    loop = iris_stepper()
    start = ARMS[arm][1]
    if start is not None:
        start(loop)
    loop(500)
    t0 = time.perf_counter()
    loop(steps)
    print(time.perf_counter() - t0)


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], int(sys.argv[3]))
        return
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--arms", default=",".join(ARMS))
    args = parser.parse_args()
    arms = args.arms.split(",")
    if "plain" not in arms:
        arms.insert(0, "plain")
    us: dict[str, list[float]] = {a: [] for a in arms}
    for _ in range(args.rounds):
        for arm in arms:
            out = subprocess.run([sys.executable, __file__, "--worker", arm, str(args.steps)],
                                 check=True, capture_output=True, text=True).stdout
            us[arm].append(float(out.split()[-1]) / args.steps * 1e6)
    base = statistics.median(us["plain"])
    print(f"{args.rounds} rounds of {args.steps} steps; torch {torch.__version__}\n")
    print("| arm | median µs per step | overhead vs plain | each round (µs) |")
    print("|---|---:|---:|---|")
    for arm in arms:
        med = statistics.median(us[arm])
        rounds = ", ".join(f"{x:.0f}" for x in us[arm])
        print(f"| {ARMS[arm][0]} | {med:.1f} | {(med / base - 1) * 100:+.1f}% | {rounds} |")


if __name__ == "__main__":
    main()
