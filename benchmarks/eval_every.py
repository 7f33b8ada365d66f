"""What evaluating less often buys on examples/eval_too_often.py, against the doctor's evaluation_heavy prediction.

    python benchmarks/eval_every.py                  # every 50 and every 200 steps, 5 rounds
    python benchmarks/eval_every.py --rounds 9 --steps 1000

The example's whole training loop (its data made, its evaluations, its prints sent nowhere) is
timed in one process with an evaluation every 50 steps (as given) and every 200 (the advice),
alternating round by round; the speed-up is the median of the round by round ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from bench_common import alternated, measured_on, speedup  # noqa: E402
from eval_too_often import train  # noqa: E402

from trainspeed.hardware import detect_hardware  # noqa: E402


def timed(steps: int, every: int) -> float:
    with contextlib.redirect_stdout(io.StringIO()):
        t0 = time.perf_counter()
        train(steps, every)
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    if args.rounds < 1 or args.steps < 1:
        parser.exit(2, "eval_every.py: --rounds and --steps must be at least 1\n")
    given, advised = alternated(args.rounds, lambda: timed(args.steps, 50), lambda: timed(args.steps, 200))
    hw = detect_hardware()
    print(f"{measured_on(hw)}; torch {hw.torch_version}; {args.rounds} rounds of {args.steps} steps.")
    print(f"every 50 steps: median {statistics.median(given):.2f} s; every 200 steps: median "
          f"{statistics.median(advised):.2f} s; {speedup(given, advised)}")


if __name__ == "__main__":
    main()
