"""The doctor's per-step cost on the seed loop in instructions, not seconds: callgrind counts them.

    python benchmarks/doctor_instructions.py
    python benchmarks/doctor_instructions.py --steps 200 --arms plain,kept,quiet
    python benchmarks/doctor_instructions.py --steps 20000 --arms plain,run,run-nodetail,run-nowindow

On a shared 2-vCPU VM, wall-clock runs of the same loop spread by ±5% from one minute to the
next, more than the differences between two versions of the watcher. Valgrind's callgrind counts
what the CPU would execute, the same from run to run (about ±2 000 instructions per step, from the
allocator's state), and simulates the caches and branch predictors. Each arm runs in a fresh
process under callgrind with instrumentation off; a small C helper (compiled here with gcc against
valgrind's callgrind.h) switches it on for the timed steps only, so start-up does not count.

Arms (edges-only watcher, sampler and op/FLOP window off, one torch thread):
- plain: the loop alone;
- kept: watched while the step sample fills: every step takes the full step edge and is kept;
- quiet: watched with the sample advanced to 100 000 measured steps, as late in a long run: most
  steps run quiet.
Whole-run arms (the watcher starts and stops inside the counted region, as `trainspeed doctor`
watches a script: warm-up, op/FLOP window, detailed runs, the sample filling, quiet runs; sampler
off, since under valgrind it would wake a hundred times more often per step than in real time):
- run: the default watcher;
- run-nodetail: no detailed runs after the first 50 measured steps;
- run-nowindow: that, and no op/FLOP window either.
Under callgrind a whole run of 20 000 steps takes about 11 minutes per arm.
The table gives per step: instructions (Ir), L1 instruction-cache misses, mispredicted branches,
and callgrind's cycle estimate (Ir + 10 × (L1 misses + mispredicts) + 100 × last-level misses),
each as the difference from plain. Needs valgrind, its headers and gcc (Debian: valgrind, gcc).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HELPER = """#include <valgrind/callgrind.h>
void region_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void region_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT("region"); }
"""
ARMS = ("plain", "kept", "quiet", "run", "run-nodetail", "run-nowindow")
WHOLE_RUN = {"run": {}, "run-nodetail": {"detail_every": 10**9},
             "run-nowindow": {"detail_every": 10**9, "profile_steps": 0}}


def worker(arm: str, steps: int, helper: str) -> None:
    """Under callgrind: set the arm up, then count `steps` steps only."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch
    from doctor_interleaved import advance
    from doctor_overhead import iris_stepper

    from trainspeed.watch import Watcher

    region = ctypes.CDLL(helper)
    torch.set_num_threads(1)
    loop = iris_stepper()
    loop(300)
    if arm in WHOLE_RUN:
        region.region_start()
        with Watcher(sample_hz=1e-4, **WHOLE_RUN[arm]):
            loop(steps)
        region.region_stop()
        return
    if arm != "plain":
        w = Watcher(warmup=0, profile_steps=0, detail_every=10**9, sample_hz=1e-4)
        w.start()
        loop(200)  # the first 50 detailed steps, the switch to edges-only
        if arm == "quiet":
            advance(w.samples.measured, 100_000)
            loop(2)
    loop(50)
    region.region_start()
    loop(steps)
    region.region_stop()


def fail(message: str) -> None:
    """Bad input or a missing tool: one line, exit status 2."""
    print(f"doctor_instructions: {message}", file=sys.stderr)
    sys.exit(2)


def totals(path: Path) -> dict[str, int]:
    events: list[str] = []
    for line in path.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("totals:"):
            return dict(zip(events, map(int, line.split()[1:])))
    raise ValueError(f"{path}: no totals line")


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="counted steps per arm")
    parser.add_argument("--arms", default=",".join(ARMS))
    args = parser.parse_args()
    arms = [a for a in args.arms.split(",") if a]
    if unknown := [a for a in arms if a not in ARMS]:
        fail(f"unknown arm {unknown[0]!r} (choose from {', '.join(ARMS)})")
    if args.steps < 1:
        fail(f"--steps must be at least 1, got {args.steps}")
    if not shutil.which("valgrind") or not shutil.which("gcc"):
        fail("needs valgrind and gcc on PATH")
    if "plain" not in arms:
        arms.insert(0, "plain")
    with tempfile.TemporaryDirectory() as tmp:
        helper = os.path.join(tmp, "region.so")
        source = os.path.join(tmp, "region.c")
        Path(source).write_text(HELPER)
        if subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", helper, source]).returncode != 0:
            fail("could not build the helper (valgrind's headers: Debian valgrind)")
        per_step: dict[str, dict[str, float]] = {}
        for arm in arms:
            out = Path(tmp) / f"cg.{arm}"
            subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--cache-sim=yes",
                            "--branch-sim=yes", f"--callgrind-out-file={out}", sys.executable, __file__,
                            "--worker", arm, str(args.steps), helper],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            t = totals(Path(f"{out}.1"))  # the dump at region_stop
            misses = t["I1mr"] + t["D1mr"] + t["D1mw"]
            t["CEst"] = t["Ir"] + 10 * (misses + t["Bcm"] + t["Bim"]) + 100 * (t["ILmr"] + t["DLmr"] + t["DLmw"])
            per_step[arm] = {k: v / args.steps for k, v in t.items()}
    base = per_step["plain"]
    print(f"callgrind, {args.steps} steps per arm; torch {__import__('torch').__version__}\n")
    print("| arm | Ir per step | L1i misses | mispredicts | cycle estimate |")
    print("|---|---:|---:|---:|---:|")
    for arm, p in per_step.items():
        cells = [f"{p[k] / 1e3:.1f} k" if arm == "plain" else f"{(p[k] - base[k]) / 1e3:+.1f} k"
                 for k in ("Ir", "I1mr")]
        cells.append(f"{(p['Bcm'] + p['Bim']) / 1e3:.1f} k" if arm == "plain"
                     else f"{(p['Bcm'] + p['Bim'] - base['Bcm'] - base['Bim']) / 1e3:+.1f} k")
        cells.append(f"{p['CEst'] / 1e3:.0f} k" if arm == "plain"
                     else f"{(p['CEst'] - base['CEst']) / 1e3:+.1f} k ({(p['CEst'] / base['CEst'] - 1) * 100:+.1f}%)")
        print(f"| {arm} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
