"""The doctor's first verdict on each realistic example, its predicted gain against the gain measured by applying
its action.

    python benchmarks/realistic_gains.py [--rounds 5] [--only char_gpt,vae]

For each script in examples/realistic/: `trainspeed doctor --json` on it as given names the first verdict and its
predicted speed-up; where this benchmark knows the script's own setting that applies that verdict's action
(`ADVICE`), the script runs as given and as advised, in turn for `--rounds` rounds (a slow moment of the machine
hits both alike), each in its own process, timed by the script's own "training time" line (its training loop,
start-up left out). The measured gain is the median of the round by round ratios, and beside it the fastest
round as given over the fastest as advised (other tenants' load on a shared machine adds time to either arm at
random, which pulls a ratio towards 1; each arm's fastest round is the one it lost least to, as `timeit` takes
the least of its repeats); the error is predicted / measured - 1 for each (goal: within +/-25%). Prints a
Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

from bench_common import measured_on

from trainspeed.hardware import detect_hardware

HERE = Path(__file__).resolve().parents[1] / "examples" / "realistic"
RUNS: dict[str, list[str]] = {  # each script as the benchmark runs it (sizes for this 2-core machine)
    "char_gpt": ["--max-iters", "60", "--eval-iters", "10"],
    "image_classifier": ["--epochs", "2"],
    "finetune_accum": ["--steps", "40"],
    "vae": ["--epochs", "40"],  # 1 880 steps: enough for the fast loop to capture the step (about 1 200)
    "policy_gradient": ["--episodes", "30"],
    "tabular_mlp": ["--epochs", "30"],  # enough steps for trainspeed.fit's capture to repay itself
}
ADVICE: dict[tuple[str, str], list[str]] = {  # (script, first verdict) -> the script's setting that applies the action
    ("char_gpt", "evaluation_heavy"): ["--eval-interval", "40"],  # "evaluate 4 times less often"
    # on this 2-core machine workers would take the cores the CNN's compute uses: "make __getitem__ cheaper
    # (precompute, cache)"; the script's --precompute decodes, resizes and normalises once, crops and jitters per
    # sample
    ("image_classifier", "input_bound"): ["--precompute"],
    ("tabular_mlp", "host_code_heavy"): ["--preprocess-once"],  # the per-epoch pandas work out of the loop
    ("tabular_mlp", "outside_work"): ["--preprocess-once"],
    # "a captured or compiled step (trainspeed.fit replays the step's ops without Python)": the script's --fit hands
    # each epoch's steps to trainspeed's fast loop, its preprocessing as before, with Adam(fused=True) so that no
    # host read stops the capture
    ("tabular_mlp", "launch_bound"): ["--fit"],
    ("vae", "launch_bound"): ["--fit"],  # the same: its epochs' steps by the fast loop, test pass and save as before
}


def doctor(script: str) -> dict:  # type: ignore[type-arg]
    proc = subprocess.run([sys.executable, "-m", "trainspeed", "doctor", "--json", "-", str(HERE / f"{script}.py"),
                           *RUNS[script]], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def loop_seconds(script: str, extra: list[str]) -> float:
    proc = subprocess.run([sys.executable, str(HERE / f"{script}.py"), *RUNS[script], *extra],
                          capture_output=True, text=True, check=True)
    found = re.search(r"training time: ([0-9.]+) s", proc.stdout)
    if found is None:
        raise SystemExit(f"{script} printed no training time")
    return float(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="", help="comma-separated script names (default: all)")
    args = parser.parse_args()
    names = [n for n in RUNS if not args.only or n in args.only.split(",")]
    print(measured_on(detect_hardware()) + f", {args.rounds} alternated rounds")
    print("| script | first verdict | predicted | applied | measured [range] | fastest / fastest | error |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        verdicts = doctor(name)["verdicts"]
        first = verdicts[0] if verdicts else None
        if first is None or first["predicted_speedup"] is None:
            label = first["id"] if first else "none"
            print(f"| {name} | {label} | - | - | - | - | - |")
            continue
        advice = ADVICE.get((name, first["id"]))
        predicted = first["predicted_speedup"]
        if advice is None:
            print(f"| {name} | {first['id']} | {predicted:.2f}x | no single setting | - | - | - |")
            continue
        given, advised = [], []
        for _ in range(args.rounds):
            given.append(loop_seconds(name, []))
            advised.append(loop_seconds(name, advice))
        ratios = [g / a for g, a in zip(given, advised)]
        measured, fastest = statistics.median(ratios), min(given) / min(advised)
        print(f"| {name} | {first['id']} | {predicted:.2f}x | `{' '.join(advice)}` | {measured:.2f}x "
              f"[{min(ratios):.2f}, {max(ratios):.2f}] | {fastest:.2f}x | {predicted / measured - 1:+.0%}, "
              f"{predicted / fastest - 1:+.0%} |", flush=True)


if __name__ == "__main__":
    main()
