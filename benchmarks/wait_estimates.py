"""How much of a phase's time a busy machine took: estimates of the waits for a core against the phases alone.

    python benchmarks/wait_estimates.py [--busy 2] [--only log_every_step,pil_augment]

Each example runs under `trainspeed doctor` alone, then beside `--busy` processes spinning on the same cores. On the
detailed steps the phase clock reads the training thread's and torch's intra-op threads' run-queue waits at every
phase edge (`watch/run_queue.py`); this records each interval's phase, wall time and each thread's waited
nanoseconds, and gives every phase's time left by three estimates of what the interval lost:
- `sum`: the threads' waits summed, at most the interval (what the doctor uses);
- `union`: the time at least one thread waited, each thread's waits taken as independent of the others';
- `main`: the training thread's own wait.
The truth to meet is the phase's time alone (the same intervals, on a quiet machine). Only intervals inside the
steps count (the busy run's ones with the intra-op threads read, none over 0.3 s: the script's set-up is not a
step's).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_common import measured_on

from trainspeed.hardware import detect_hardware

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {
    "log_every_step": ["examples/log_every_step.py", "--steps", "1500"],
    "pil_augment": ["examples/realistic/pil_augment.py", "--epochs", "3"],
    "checkpoint_every_step": ["examples/checkpoint_every_step.py", "--steps", "60"],
}

RECORD = """
import json, os, sys
import trainspeed.watch.phases as phases
intervals, last = [], {}
original = phases.PhaseClock._wait_to
def _wait_to(self, phase, seconds):
    per = []
    for fd in self._waited.fds:  # the clock's reader: run_queue.ThreadWait
        try:
            waited = int(os.pread(fd, 64, 0).split()[1])
        except (OSError, ValueError, IndexError):
            continue
        per.append(waited - last.get(fd, waited))
        last[fd] = waited
    intervals.append((phase, seconds, per))
    return original(self, phase, seconds)
phases.PhaseClock._wait_to = _wait_to
from trainspeed.cli import main
try:
    main(["doctor", "--json", os.devnull, *sys.argv[2:]])
finally:
    with open(sys.argv[1], "w") as f:
        json.dump(intervals, f)
"""

ESTIMATES = ("sum", "union", "main")


def lost(estimate: str, seconds: float, waits_ns: list[int]) -> float:
    waits = [ns * 1e-9 for ns in waits_ns]
    if seconds <= 0.0 or not waits:
        return 0.0
    if estimate == "main":
        return min(waits[0], seconds)
    if estimate == "sum":
        return min(sum(waits), seconds)
    kept = 1.0
    for w in waits:
        if w > 0:
            kept *= max(0.0, 1.0 - w / seconds)
    return seconds * (1.0 - kept)


def phases_left(path: str, busy: bool) -> dict[str, dict[str, float]]:
    """Per estimate (and `wall`): each phase's seconds over the steps' intervals."""
    with open(path) as f:
        intervals = json.load(f)
    left: dict[str, dict[str, float]] = {name: collections.defaultdict(float) for name in ("wall", *ESTIMATES)}
    for phase, seconds, waits in intervals:
        if seconds > 0.3 or (busy and len(waits) < 2):
            continue
        left["wall"][phase] += seconds
        for name in ESTIMATES:
            left[name][phase] += seconds - lost(name, seconds, waits)
    return left


def run(example: list[str], out: str, busy: int) -> None:
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
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
    args = parser.parse_args()
    print(measured_on(detect_hardware(), "cpu"))
    print("\n| example | phase | alone s (share) | busy wall s | " + " | ".join(f"busy less `{e}` s (share)"
                                                                       for e in ESTIMATES) + " |")
    print("|---|---|---:|---:|" + "---:|" * len(ESTIMATES))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only.split(","):
            alone_path, busy_path = os.path.join(tmp, f"{name}-alone.json"), os.path.join(tmp, f"{name}-busy.json")
            run(EXAMPLES[name], alone_path, 0)
            run(EXAMPLES[name], busy_path, args.busy)
            alone = phases_left(alone_path, busy=False)["wall"]
            busy = phases_left(busy_path, busy=True)
            alone_share = shares(alone)
            est_share = {e: shares(busy[e]) for e in ESTIMATES}
            for phase in sorted(alone, key=lambda p: -alone[p]):
                if alone[phase] < 0.01 * sum(alone.values()):
                    continue
                cells = " | ".join(f"{busy[e][phase]:.2f} ({est_share[e].get(phase, 0.0):.0%})" for e in ESTIMATES)
                print(f"| {name} | {phase} | {alone[phase]:.2f} ({alone_share[phase]:.0%}) | "
                      f"{busy['wall'][phase]:.2f} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
