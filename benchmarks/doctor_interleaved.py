"""The doctor's steady per-step cost on the seed loop, plain and watched blocks alternating in one process.

    python benchmarks/doctor_interleaved.py
    python benchmarks/doctor_interleaved.py --rounds 60 --block 300 --sample-hz 50
    python benchmarks/doctor_interleaved.py --sampled 100000
    python benchmarks/doctor_interleaved.py --device cuda    # the seed loop on the GPU
    python benchmarks/doctor_interleaved.py --whole --block 20000 --rounds 30   # whole default runs

Fresh-process runs (doctor_overhead.py) compare whole runs seconds apart, and on a shared 2-vCPU
VM their spread (±5%) hides differences of a few percent. Here one process alternates a plain
block and a watched block of the same loop, `--rounds` times, so slow drifts of the machine hit
both arms alike; the table gives each arm's median µs per step and the watched/plain ratio pair by
pair (median and quartiles), and a last line each arm's fastest block and lower quartile of blocks
(a slower moment of the machine only adds time, so these are the least disturbed measures).

A watched block is a fresh `Watcher(warmup=0, profile_steps=0, detail_every=10**9)`: its first 50
steps (all detailed, then the switch to edges-only) run untimed, then `--block` edges-only steps are
timed. By default every timed step is kept in the step sample (it is not full yet): the dearest of
the step edge's paths. `--sampled P` first brings the sample to where it stands after P measured
steps: it then keeps about 256 / P of the timed steps, and most of the others run quiet (their
end only counts them), as late in a long run. Not in these figures: the detailed runs (one step in
32 by default), the op/FLOP window and the start-up, which doctor_overhead.py includes.

`--whole` times whole watched runs instead: each watched block is a default `Watcher()` started
and stopped inside the timing, over `--block` steps (20 000: doctor_overhead.py's seed run), the
arms' order alternating round by round. Each run's watcher gets the process's whole budget of
hook switches (patching.RESUME_BUDGET, a guard for one process's lifetime that a run of this
benchmark would otherwise spend after a dozen rounds). What fresh processes add (memory layout, the
first import of what the op/FLOP window uses) is not in these figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import bootstrap_interval, measured_on  # noqa: E402
from doctor_overhead import iris_stepper  # noqa: E402

from trainspeed.hardware import detect_hardware  # noqa: E402
from trainspeed.watch import Watcher, patching  # noqa: E402
from trainspeed.watch.result import StepRecord  # noqa: E402
from trainspeed.watch.samples import Reservoir  # noqa: E402
from trainspeed.watch.schedule import DETAILED_FIRST  # noqa: E402


def advance(sample: Reservoir[StepRecord], measured: int) -> None:
    """Offer the sample copies of its first item until it has seen `measured` items, as a run of that
    many measured steps would have."""
    while sample.seen < measured:  # one item at a time (wants/add/skip): earlier watchers run it too
        if sample.wants():
            sample.add(sample.items[0])
        else:
            sample.skip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--block", type=int, default=300, help="timed steps per block")
    parser.add_argument("--sample-hz", type=float, default=50.0, help="stack sampler rate (1e-4: off)")
    parser.add_argument("--sampled", type=int, default=0,
                        help="start the timed steps where the step sample stands after this many measured steps")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--whole", action="store_true",
                        help="time whole default watched runs of --block steps, start and stop included")
    args = parser.parse_args()
    if args.rounds < 2 or args.block < 1:
        parser.exit(2, "doctor_interleaved.py: --rounds must be at least 2 and --block at least 1\n")
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        parser.exit(2, "doctor_interleaved.py: --device cuda needs a CUDA device\n")
    loop = iris_stepper(args.device)
    loop(1000)  # first-call costs

    def timed(run: Callable[[], None]) -> float:
        """µs per step of `run()` (`--block` steps), the device's queue drained before both clock reads."""
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        run()
        if cuda:
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) / args.block * 1e6

    def block() -> None:
        loop(args.block)

    def whole_run() -> None:  # the watcher's start and stop inside the timing
        with Watcher(sample_hz=args.sample_hz):
            loop(args.block)

    def whole() -> float:
        patching._resumes[0] = 0  # see the module's docstring
        return timed(whole_run)

    def edges_only() -> float:
        with Watcher(warmup=0, profile_steps=0, detail_every=10**9, sample_hz=args.sample_hz) as w:
            loop(DETAILED_FIRST + 10)  # the detailed first steps and the switch to edges-only, untimed
            advance(w.samples.measured, args.sampled)
            loop(2)  # a step edge that sees the advanced sample (and may start a quiet run)
            return timed(block)

    watched_arm = whole if args.whole else edges_only
    plain: list[float] = []
    watched: list[float] = []
    for r in range(args.rounds):
        loop(DETAILED_FIRST + 10)
        if args.whole and r % 2:  # whole runs alternate the arms' order round by round
            watched.append(watched_arm())
            plain.append(timed(block))
        else:
            plain.append(timed(block))
            watched.append(watched_arm())
    ratios = sorted(w / p - 1 for p, w in zip(plain, watched))
    quart = statistics.quantiles(ratios, n=4)
    hw = detect_hardware()
    where = torch.cuda.get_device_name() if cuda else "CPU"
    print(f"{measured_on(hw)}, {where}; torch {hw.torch_version}; {args.rounds} rounds of "
          f"{args.block} steps, sampler {args.sample_hz:g} Hz, "
          + ("whole default runs.\n" if args.whole else f"step sample advanced to {args.sampled} steps.\n"))
    p, w = statistics.median(plain), statistics.median(watched)
    low, high = bootstrap_interval(ratios, statistics.median, resamples=2000)
    print("| arm | median µs per step | watched − plain | pair by pair: median [quartiles] | "
          "95% interval of that median |")
    print("|---|---:|---:|---|---|")
    print(f"| plain | {p:.1f} | | | |")
    arm = "watched, whole runs" if args.whole else "watched, edges only"
    print(f"| {arm} | {w:.1f} | {w - p:+.1f} µs ({(w / p - 1) * 100:+.1f}%) | "
          f"{statistics.median(ratios) * 100:+.1f}% [{quart[0] * 100:+.1f}%, {quart[2] * 100:+.1f}%] | "
          f"{low * 100:+.1f}% to {high * 100:+.1f}% |")
    by_round = ", ".join(f"{b / a - 1:+.1%}" for a, b in zip(plain, watched))
    print(f"\nwatched / plain, round by round: {by_round}")
    # a slower moment of the machine only ever adds time to a block, so each arm's faster blocks are the
    # least disturbed measure of its own cost (timeit's argument for the minimum); both arms draw from
    # the same moments, alternating
    pq, wq = statistics.quantiles(plain, n=4)[0], statistics.quantiles(watched, n=4)[0]
    print(f"each arm's fastest block: plain {min(plain):.1f}, watched {min(watched):.1f} µs per step "
          f"({min(watched) / min(plain) - 1:+.1%}); lower quartile of its blocks: plain {pq:.1f}, watched "
          f"{wq:.1f} ({wq / pq - 1:+.1%})")


if __name__ == "__main__":
    main()
