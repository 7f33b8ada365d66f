"""The doctor's whole-process cost as a user times it: `python SCRIPT` against `trainspeed doctor SCRIPT`, start to
exit (the doctor's probes after the script and its report included), alternated over rounds, fresh processes.

    python benchmarks/process_overhead.py [--rounds 3]

Each round runs the script plain and under the doctor, in an order that turns from round to round.

The scripts are the realistic examples at lengths of about ten seconds on a 2-core CPU. The CPU's description is
read once before the rounds (py-cpuinfo's answer is cached per machine: a machine's first doctor run pays for it),
and trainspeed's modules are compiled to bytecode first, as pip compiles an installed package's: where
PYTHONDONTWRITEBYTECODE is set (as on this project's CI machines) a source tree's modules are otherwise compiled
afresh by every doctor run, about 0.15 s that no installed copy pays.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import measured_on

from trainspeed.hardware import detect_hardware

ROOT = Path(__file__).resolve().parents[1]
REALISTIC = ROOT / "examples" / "realistic"
SCRIPTS = {
    "vae.py": ["--epochs", "90"],
    "sequence_cells.py": ["--steps", "1300"],
    "char_gpt.py": ["--max-iters", "400", "--eval-iters", "10"],
    # shaped like the public programs of issue 74: an LBFGS closure over an nn.LSTMCell loop, a word language model
    # with a hand-written update, a GAN with two optimizers
    "sine_lbfgs.py": ["--steps", "4", "--length", "200", "--future", "200"],
    "word_lm.py": ["--epochs", "3"],
    "dcgan.py": ["--epochs", "4"],
    "image_classifier.py": ["--epochs", "2"],
    "finetune_accum.py": ["--steps", "40"],
    "policy_gradient.py": ["--episodes", "30"],
    "tabular_mlp.py": ["--epochs", "30"],
    "frame_rows.py": ["--epochs", "2"],
    "skipgram.py": ["--steps", "100"],
    "pil_augment.py": ["--epochs", "3"],
    # a few seconds, most of them the interpreter's and torch's start (its steps fixed by the seed)
    "poly_regression.py": ["--seed", "1"],
}


def _timed(argv: list[str], cwd: str) -> float:
    """Seconds of one fresh process, run in `cwd` (what a script saves lands there, not in this checkout)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    start = time.perf_counter()
    subprocess.run(argv, check=True, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated script names without .py (default: all)")
    args = parser.parse_args()
    only = {f"{name}.py" for name in args.only.split(",") if name}
    if only - SCRIPTS.keys():
        parser.error(f"no such script: {', '.join(sorted(only - SCRIPTS.keys()))} (have {', '.join(SCRIPTS)})")
    hardware = detect_hardware()  # the CPU's description cached before the first timed doctor
    compileall.compile_dir(str(ROOT / "src" / "trainspeed"), quiet=1)  # as pip compiles an installed package
    print(measured_on(hardware, "cpu"))
    print("\n| script | plain s (each round) | doctor s (each round) | doctor / plain (medians) | the doctor's after the "
          "script, s (median) | doctor / plain, round by round (median) |")
    print("|---|---|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for script, script_args in SCRIPTS.items():
            if only and script not in only:
                continue
            path = str(REALISTIC / script)
            plain, doctor, after = [], [], []
            report = os.path.join(tmp, "doctor.json")
            arms = [(plain, [sys.executable, path, *script_args]),
                    (doctor, [sys.executable, "-m", "trainspeed", "doctor", "--json", report, path, *script_args])]
            for i in range(args.rounds):
                # the order turns each round (plain first, then the doctor first): a slow stretch of a shared VM,
                # minutes long, falls on each side in turn
                for times, argv in arms if i % 2 == 0 else arms[::-1]:
                    times.append(_timed(argv, tmp))
                # the process's seconds to the script's end, in the report: the rest is the probes, the report
                # and the interpreter's exit
                with open(report) as f:
                    process_s = (json.load(f).get("process") or {}).get("seconds")
                if process_s is not None:
                    after.append(doctor[-1] - process_s)
            ratio = statistics.median(doctor) / statistics.median(plain)
            paired = statistics.median(d / p for d, p in zip(doctor, plain))
            rest = f"{statistics.median(after):.2f}" if after else "-"
            print(f"| `{script} {' '.join(script_args)}` | {', '.join(f'{s:.2f}' for s in plain)} | "
                  f"{', '.join(f'{s:.2f}' for s in doctor)} | {ratio:.2f}x | {rest} | {paired:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
