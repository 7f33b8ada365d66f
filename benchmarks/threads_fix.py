"""What the cores' count of threads buys on examples/too_many_threads.py, against thread_oversubscription's prediction.

    python benchmarks/threads_fix.py                 # 4 x cores threads against cores, 5 rounds
    python benchmarks/threads_fix.py --rounds 9 --steps 300
    python benchmarks/threads_fix.py --given 1       # 1 thread against cores (threads_unused)

The example's training loop is timed in one process with its default threads (four per core, as
given; `--given N` for another count) and with one per core (the advice), alternating round by round; the speed-up is the median of
the round by round ratios. Compare it with `trainspeed doctor examples/too_many_threads.py`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from bench_common import alternated, measured_on, speedup  # noqa: E402
from too_many_threads import cores, train  # noqa: E402

from trainspeed.hardware import detect_hardware  # noqa: E402


def timed(steps: int, threads: int) -> float:
    t0 = time.perf_counter()
    train(steps, threads)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--given", type=int, default=4 * cores(), help="torch's threads as given")
    args = parser.parse_args()
    if args.rounds < 1 or args.steps < 1 or args.given < 1:
        parser.exit(2, "threads_fix.py: --rounds, --steps and --given must be at least 1\n")
    many, fixed = args.given, cores()
    given, advised = alternated(args.rounds, lambda: timed(args.steps, many), lambda: timed(args.steps, fixed))
    hw = detect_hardware()
    print(f"{measured_on(hw)}; torch {hw.torch_version}; {args.rounds} rounds of {args.steps} steps.")
    print(f"{many} threads: median {statistics.median(given) / args.steps * 1e3:.2f} ms per step; {fixed} threads: "
          f"median {statistics.median(advised) / args.steps * 1e3:.2f} ms; {speedup(given, advised)}")


if __name__ == "__main__":
    main()
