"""How much of a phase's time a busy machine took: estimates of the waits for a core against the phases alone.

    python benchmarks/wait_estimates.py [--busy 2] [--only log_every_step,pil_augment] [--same-session]

Each example runs under `trainspeed doctor` alone, then beside `--busy` processes spinning on the same cores. On the
detailed steps the load's wait meter reads the training thread's and torch's intra-op threads' run-queue waits at
every phase edge (`load/waits.py`, `load/waits.py`); this records each interval's phase, wall time and each thread's waited
nanoseconds and time slices, step by step, and gives every phase's time left by four estimates of what its steps
lost:
- `sum`: the threads' waits summed (the high bound: they waited one after another);
- `longest`: the longest one thread's wait of each interval (the low bound: they waited at once);
- `joint`: each step's point where its threads waited independently of each other, the median of those points
  clipped into every step's range (`load/wait_bounds.py`);
- `bounds`: the doctor's: the same, each interval's point moved towards the longest one thread's wait as far as the
  phase's ops outlast one wait for a core (`load/op_lengths.py`, the phase's ops from the doctor's profiler
  window).
For the phases the training thread runs alone (`load.waits.SERIAL_PHASES`: data, checkpoint), `joint` and `bounds` take
that thread's own wait. The truth to meet is the phase's time alone (the same steps, on a quiet machine). Only steps
under 0.5 s count, and busy, only those with the intra-op threads read at every edge (the script's set-up is not a
step's). The last line: each estimate's error over the examples' forward, backward and optimizer phases, the
geometric mean of its ratio to alone or of alone's to it, whichever is above 1.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_common import measured_on

from trainspeed.hardware import detect_hardware
from trainspeed.load.wait_bounds import phase_wait
from trainspeed.load.waits import SERIAL_PHASES, joined, joint_wait

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {
    "log_every_step": ["examples/log_every_step.py", "--steps", "1500"],
    "pil_augment": ["examples/realistic/pil_augment.py", "--epochs", "3"],
    "checkpoint_every_step": ["examples/checkpoint_every_step.py", "--steps", "60"],
    "image_classifier": ["examples/realistic/image_classifier.py", "--epochs", "2"],
    "wide_mlp": ["examples/wide_mlp.py", "--steps", "25"],
    "float64_numpy": ["examples/float64_numpy.py", "--steps", "150"],
    "sequence_cells": ["examples/realistic/sequence_cells.py", "--steps", "300", "--length", "24", "--batch-size", "32"],
}

RECORD = """
import json, os, sys
import trainspeed.load.waits as meter
intervals, last, lengths = [], {}, {}
charged, closed, forget = meter.WaitMeter.charged, meter.WaitMeter.closed, meter.WaitMeter.forget
def _charged(self, phase, seconds):
    per = []
    for fd in self.reader.fds:  # the meter's reader: load.counters.ThreadWait
        try:
            fields = os.pread(fd, 64, 0).split()
            waited, slices = int(fields[1]), int(fields[2])
        except (OSError, ValueError, IndexError):
            continue
        was = last.get(fd, (waited, slices))
        per.append((waited - was[0], slices - was[1]))
        last[fd] = (waited, slices)
    intervals.append((phase, seconds, per))
    return charged(self, phase, seconds)
def _closed(self):
    intervals.append(("END", 0.0, []))  # the step's last interval came just before
    lengths.update(self.op_lengths)  # each phase's ops, from the profiler window
    return closed(self)
def _forget(self):
    intervals.append(("FORGET", 0.0, []))  # what came before is no step's
    return forget(self)
meter.WaitMeter.charged, meter.WaitMeter.closed, meter.WaitMeter.forget = _charged, _closed, _forget
from trainspeed.cli import main
try:
    main(["doctor", "--json", os.devnull, *sys.argv[2:]])
finally:
    with open(sys.argv[1], "w") as f:
        json.dump({"intervals": intervals, "op_lengths": lengths}, f)
"""

ESTIMATES = ("sum", "longest", "joint", "bounds")
PARALLEL = ("forward", "backward", "optimizer")
"""The phases torch's intra-op threads run in: where the estimates differ."""
Step = dict[str, tuple[float, float, float, float, float, float]]
"""A step's phases: (wall, summed waits, longest one thread's waits, the doctor's points, the training thread's own
waits, the joint waits alone),
seconds."""


def steps_of(path: str, busy: bool) -> list[Step]:
    """The recorded steps, each phase's intervals added up (each interval's waits at most its own time)."""
    with open(path) as f:
        recorded = json.load(f)
    lengths = recorded["op_lengths"]
    steps: list[Step] = []
    step: dict[str, list[float]] = collections.defaultdict(lambda: [0.0] * 6)
    read_all = True
    for phase, seconds, per in recorded["intervals"]:
        if phase == "END":
            if read_all and sum(p[0] for p in step.values()) < 0.5:
                steps.append({name: (p[0], p[1], p[2], p[3], p[4], p[5]) for name, p in step.items()})
            step, read_all = collections.defaultdict(lambda: [0.0] * 6), True
            continue
        if phase == "FORGET":
            step, read_all = collections.defaultdict(lambda: [0.0] * 6), True
            continue
        waits = [ns * 1e-9 for ns, _ in per]
        read_all = read_all and (len(waits) >= 2 or not busy)
        summed = min(sum(waits), seconds)
        longest = min(max(waits, default=0.0), summed)
        part = step[phase]
        part[0] += seconds
        part[1] += summed
        part[2] += longest
        # the doctor's point (load.counters.ThreadWait.joint): the joint wait, towards the longest as the phase's ops
        # outlast one wait for a core (the waits over the time slices run after them)
        joint = min(joint_wait(waits, seconds), summed)
        slices = sum(n for ns, n in per if ns)
        one_wait = sum(waits) / slices if slices else sum(waits)
        part[3] += joined(joint, longest, lengths.get(phase, ()), one_wait)
        part[4] += min(waits[0] if waits else 0.0, summed)  # the clock's reader opens with the training thread
        part[5] += joint
    return steps


def phases_left(steps: list[Step]) -> dict[str, dict[str, float]]:
    """Per estimate (and `wall`): each phase's milliseconds a step less what the estimate says the steps lost."""
    left: dict[str, dict[str, float]] = {name: collections.defaultdict(float) for name in ("wall", *ESTIMATES)}
    for phase in {p for s in steps for p in s}:
        parts = [s.get(phase, (0.0,) * 6) for s in steps]
        wall = sum(p[0] for p in parts)
        # the doctor's reading of a phase the training thread runs alone: its own wait, every bound the same
        found = phase_wait([(p[0], p[4], p[4], p[4]) if phase in SERIAL_PHASES else p[:4] for p in parts])
        joint = phase_wait([(p[0], p[4], p[4], p[4]) if phase in SERIAL_PHASES else (*p[:3], p[5]) for p in parts])
        per_step = 1e3 / len(steps)
        left["wall"][phase] = wall * per_step
        left["sum"][phase] = sum(p[0] - p[1] for p in parts) * per_step
        left["longest"][phase] = sum(p[0] - p[2] for p in parts) * per_step
        left["bounds"][phase] = wall * (1.0 - found.part) * per_step if found is not None else 0.0
        left["joint"][phase] = wall * (1.0 - joint.part) * per_step if joint is not None else 0.0
    return left


def run(example: list[str], out: str, busy: int, own_sessions: bool = True) -> None:
    """The example under the recording doctor beside `busy` spinning processes, each in a session of its own (as a
    user's other jobs, and the test suite's `--busy` ones: Linux's autogroup shares the cores between sessions first)
    or, with `own_sessions` False, in this one's (shared between threads)."""
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=own_sessions)
                for _ in range(busy)]
    try:
        for p in spinners:
            if cores is not None:
                os.sched_setaffinity(p.pid, cores)
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        subprocess.run([sys.executable, "-c", RECORD, out, *example], cwd=ROOT, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def shares(seconds: dict[str, float]) -> dict[str, float]:
    total = sum(seconds.values()) or 1.0
    return {phase: s / total for phase, s in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=2)
    parser.add_argument("--only", default=",".join(EXAMPLES))
    parser.add_argument("--same-session", action="store_true",
                        help="the busy processes in this session (the cores shared between threads, not sessions)")
    args = parser.parse_args()
    print(measured_on(detect_hardware(), "cpu"))
    print("\n| example | phase | alone ms (share) | busy wall ms | " + " | ".join(f"busy less `{e}` ms (share)"
                                                                       for e in ESTIMATES) + " |")
    print("|---|---|---:|---:|" + "---:|" * len(ESTIMATES))
    errors: dict[str, list[float]] = {e: [] for e in ESTIMATES}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only.split(","):
            alone_path, busy_path = os.path.join(tmp, f"{name}-alone.json"), os.path.join(tmp, f"{name}-busy.json")
            run(EXAMPLES[name], alone_path, 0)
            run(EXAMPLES[name], busy_path, args.busy, own_sessions=not args.same_session)
            alone = phases_left(steps_of(alone_path, busy=False))["wall"]
            busy = phases_left(steps_of(busy_path, busy=True))
            alone_share = shares(alone)
            est_share = {e: shares(busy[e]) for e in ESTIMATES}
            for phase in sorted(alone, key=lambda p: -alone[p]):
                if alone[phase] < 0.01 * sum(alone.values()):
                    continue
                cells = " | ".join(f"{busy[e][phase]:.2f} ({est_share[e].get(phase, 0.0):.0%})" for e in ESTIMATES)
                if phase in PARALLEL:
                    for e in ESTIMATES:
                        errors[e].append(abs(math.log(max(busy[e][phase], 1e-6) / alone[phase])))
                print(f"| {name} | {phase} | {alone[phase]:.2f} ({alone_share[phase]:.0%}) | "
                      f"{busy['wall'][phase]:.2f} | {cells} |", flush=True)
    print("| forward, backward, optimizer | error (geometric mean) | | | " + " | ".join(
        f"{math.exp(sum(errors[e]) / len(errors[e])):.2f}x" if errors[e] else "" for e in ESTIMATES) + " |")


if __name__ == "__main__":
    main()
