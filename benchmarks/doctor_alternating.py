"""Whole watched runs of the seed loop (or the ~10 ms MLP step) against plain ones, two processes taking turns.

    python benchmarks/doctor_alternating.py
    python benchmarks/doctor_alternating.py --runs 12 --steps 20000 --slice 500
    python benchmarks/doctor_alternating.py --loop mlp            # the ~10 ms step: 600 steps, turns of 50
    python benchmarks/doctor_alternating.py --sample-hz 1e-4     # the stack sampler off
    python benchmarks/doctor_alternating.py --plain-both          # A/A: the harness's own bias

A whole watched run (the watcher started, 20 000 seed steps, the watcher stopped) takes about 8 s,
and on a shared 2-vCPU VM the same plain run takes from 7.4 to 11 s from one minute to the next:
whole runs timed one after the other (doctor_overhead.py, doctor_interleaved.py --whole) compare
moments of the machine as much as the two arms. Here two processes run the same loop, one plain and
one watched by a default `Watcher()`, and take turns: `--slice` steps in one, then `--slice` in the
other (which goes first alternates slice by slice), so both arms' steps are timed within a fraction
of a second of each other all through the run. Two processes are not alike, though: an A/A run
(`--plain-both`) had one of them 2.3% faster than the other in all six runs (memory layout), a
bias as large as the effect. So the watcher runs in the two processes in turn, run by run, and
the overhead is taken over pairs of runs, one with the watcher in each process (`--runs` even). Each process times only its own slices (between
the parent's go and its reply); the watched process starts its watcher inside its first slice's
timing and stops it inside its last, so the start, the op/FLOP window, the detailed runs, the step
sample filling, the quiet runs and the stop are all inside its time, as in `trainspeed doctor`.

The process not running is stopped (SIGSTOP) until its turn: its threads (torch's OpenMP workers,
the watched process's stack sampler) take no CPU from the other's slice. The sampler, stopped past
its 20 ms tick, samples once as soon as its process continues: about one extra sample per slice,
which this measure counts against the watcher (the sampler's 50 samples a second cost it 35 µs
each). Not counted: what a fresh process adds (the first import of what the op/FLOP window uses),
and what `trainspeed doctor` does after the run (its probes and the report).

Prints one line per run (plain and watched seconds, the watcher's share), the overhead over the pairs
of runs (mean with a 95% bootstrap interval, median, range), the two processes' own difference (what
the pairs cancel), and the watcher's extra time by slice position (the first slice holds the start,
the window and the sample's first 256 steps).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


LOOPS = {"iris": (20000, 500, 1000, 60), "mlp": (600, 50, 20, 4)}
"""--loop: (steps per run, steps per turn, steps run once at the start for first-call costs, steps run
between runs), for the seed's Iris loop (0.4 ms steps) and doctor_overhead.py's ~10 ms MLP step."""


def _child(loop_name: str, sample_hz: float, conn: Any) -> None:
    """One process: answers ("slice", steps, first, last, watched) with the slice's seconds, until ("quit",)."""
    from doctor_overhead import iris_stepper, mlp_stepper

    from trainspeed.watch import Watcher, patching

    loop = (iris_stepper if loop_name == "iris" else mlp_stepper)()
    loop(LOOPS[loop_name][2])  # first-call costs
    watcher: Watcher | None = None
    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg[0] == "quit":
            return
        if msg[0] == "warm":  # untimed, between runs, in both processes alike
            loop(msg[1])
            conn.send(0.0)
            continue
        _, steps, first, last, watched = msg
        t0 = time.perf_counter()
        if watched and first:
            patching._resumes[0] = 0  # each run gets the process's whole budget of hook switches (patching.RESUME_BUDGET)
            watcher = Watcher(sample_hz=sample_hz).start()
        loop(steps)
        if watcher is not None and last:
            watcher.stop()
            watcher = None
        conn.send(time.perf_counter() - t0)


class _Arm:
    """A child process that runs only when asked (SIGCONT), stopped otherwise (SIGSTOP)."""

    def __init__(self, ctx: Any, loop: str, sample_hz: float) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_child, args=(loop, sample_hz, child), daemon=True)
        self.proc.start()
        if self.conn.recv() != "ready":
            raise RuntimeError("arm did not start")
        os.kill(self.proc.pid, signal.SIGSTOP)

    def ask(self, *msg: Any) -> float:
        os.kill(self.proc.pid, signal.SIGCONT)
        self.conn.send(msg)
        seconds = self.conn.recv()
        os.kill(self.proc.pid, signal.SIGSTOP)
        return float(seconds)

    def close(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)
        self.conn.send(("quit",))
        self.proc.join(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="whole runs, each timed plain in one process and watched in the other")
    parser.add_argument("--loop", choices=sorted(LOOPS), default="iris",
                        help="the seed's Iris loop (0.4 ms steps) or doctor_overhead.py's ~10 ms MLP step")
    parser.add_argument("--steps", type=int, help="steps per run (iris: 20000, doctor_overhead.py's seed run; mlp: 600)")
    parser.add_argument("--slice", type=int, help="steps per turn (iris: 500, mlp: 50)")
    parser.add_argument("--sample-hz", type=float, default=50.0, help="stack sampler rate (1e-4: off)")
    parser.add_argument("--plain-both", action="store_true",
                        help="the second process runs plain too: what the harness itself gives two equal arms")
    args = parser.parse_args()
    args.steps = LOOPS[args.loop][0] if args.steps is None else args.steps
    args.slice = min(LOOPS[args.loop][1], args.steps) if args.slice is None else args.slice
    if args.runs < 4 or args.runs % 2 or args.steps < 1 or not 1 <= args.slice <= args.steps or args.sample_hz <= 0:
        parser.exit(2, "doctor_alternating.py: --runs must be even and at least 4, --steps and --slice at least 1 "
                       "(--slice at most --steps), --sample-hz above 0\n")
    if not hasattr(signal, "SIGSTOP"):
        parser.exit(2, "doctor_alternating.py: needs SIGSTOP and SIGCONT (Linux or macOS)\n")

    import torch
    from bench_common import bootstrap_interval, measured_on

    from trainspeed.hardware import detect_hardware

    ctx = mp.get_context("spawn")
    procs = (_Arm(ctx, args.loop, args.sample_hz), _Arm(ctx, args.loop, args.sample_hz))
    slices = [args.slice] * (args.steps // args.slice) + ([args.steps % args.slice] if args.steps % args.slice else [])
    by_slice: list[list[float]] = [[] for _ in slices]
    totals: list[tuple[float, float]] = []
    """(plain seconds, watched seconds) of each run."""
    lines = []
    try:
        for run in range(args.runs):
            # the watcher runs in the two processes in turn, run by run: a process that runs the same loop faster than
            # the other (its memory layout; a plain A/A run here had one 2% faster all along) adds to the watcher's
            # cost in one run of each pair and takes it off in the other
            plain, watched = procs if run % 2 == 0 else procs[::-1]
            for proc in procs:
                proc.ask("warm", LOOPS[args.loop][3])
            p_total = w_total = 0.0
            for i, steps in enumerate(slices):
                msg = ("slice", steps, i == 0, i == len(slices) - 1)
                if (run // 2 + i) % 2:
                    w = watched.ask(*msg, not args.plain_both)
                    p = plain.ask(*msg, False)
                else:
                    p = plain.ask(*msg, False)
                    w = watched.ask(*msg, not args.plain_both)
                p_total += p
                w_total += w
                by_slice[i].append(w - p)
            totals.append((p_total, w_total))
            lines.append(f"run {run + 1}: plain {p_total:.3f} s (process {procs.index(plain) + 1}), watched "
                         f"{w_total:.3f} s (process {procs.index(watched) + 1}), {w_total / p_total - 1:+.2%}")
    finally:
        for proc in procs:
            proc.close()

    hw = detect_hardware()
    print(f"{measured_on(hw)}, CPU; torch {torch.__version__}; {args.runs} runs of {args.steps} {args.loop} steps per arm, "
          f"turns of {args.slice} steps, sampler {args.sample_hz:g} Hz"
          + (", both arms plain (A/A).\n" if args.plain_both else ".\n"))
    print("\n".join(lines))
    # each pair of runs has the watcher once in each process: its overhead has the processes' difference cancelled
    pairs = [(totals[k][1] + totals[k + 1][1]) / (totals[k][0] + totals[k + 1][0]) - 1
             for k in range(0, len(totals) - 1, 2)]
    # run 2k: process 2 watched over process 1 plain, (1 + o)(1 + d); run 2k+1 the other way, (1 + o) / (1 + d)
    gaps = [math.sqrt((totals[k][1] / totals[k][0]) / (totals[k + 1][1] / totals[k + 1][0])) - 1
            for k in range(0, len(totals) - 1, 2)]
    low, high = bootstrap_interval(pairs, statistics.fmean, resamples=4000)
    print(f"\nwatched / plain over each pair of runs (the watcher once in each process): mean {statistics.fmean(pairs):+.2%} "
          f"(95% interval of the mean {low:+.2%} to {high:+.2%}), median {statistics.median(pairs):+.2%}, pairs from "
          f"{min(pairs):+.2%} to {max(pairs):+.2%}")
    print(f"process 2 slower than process 1 at the same work by {statistics.fmean(gaps):+.2%} (mean over the pairs; "
          "cancelled above)")
    first, last = statistics.median(by_slice[0]), statistics.median(by_slice[-1])
    middle = [statistics.median(v) for v in by_slice[1:-1]]
    print(f"watched − plain by slice, median over runs: first {first * 1e3:+.1f} ms, last {last * 1e3:+.1f} ms"
          + (f", the others {min(middle) * 1e3:+.1f} to {max(middle) * 1e3:+.1f} ms (median "
             f"{statistics.median(middle) * 1e3:+.1f} ms)" if middle else ""))


if __name__ == "__main__":
    main()
