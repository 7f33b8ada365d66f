"""The doctor's first verdict on each realistic example (and any later one the script has a setting for), its
predicted gain against the gain measured by applying its action.

    python benchmarks/realistic_gains.py [--rounds 5] [--only char_gpt,vae]

For each script in examples/realistic/: `trainspeed doctor --json` on it as given names the first verdict and its
predicted speed-up; where this benchmark knows the script's own setting that applies that verdict's action
(`ADVICE`), or where the verdict's own lever is environment variables (`page_faults`' malloc settings, applied as
its `fix` line exports them), the script runs as given and as advised, in turn for `--rounds` rounds (a slow moment
of the machine hits both alike), each in its own process, timed by the script's own "training time" (or "training
loop") line (its training loop, start-up left out). The measured gain is the median of the round by round ratios, and beside it the fastest
round as given over the fastest as advised (other tenants' load on a shared machine adds time to either arm at
random, which pulls a ratio towards 1; each arm's fastest round is the one it lost least to, as `timeit` takes
the least of its repeats); the error is predicted / measured - 1 for each (goal: within +/-25%). Prints a
Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
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
    "frame_rows": ["--epochs", "4"],
    "sequence_cells": ["--steps", "1300"],  # its fused arm runs 300 steps in 0.6 s: too short a clock for a ratio
    "sine_lbfgs": ["--steps", "4", "--length", "200", "--future", "200", "--out-dir", tempfile.gettempdir()],
    "word_lm": ["--epochs", "2", "--save", str(Path(tempfile.gettempdir()) / "word_lm.pt")],
    "dcgan": ["--epochs", "4", "--outf", tempfile.gettempdir()],
    "skipgram": ["--steps", "100"],
    "pil_augment": ["--epochs", "3"],
    "poly_regression": ["--seed", "1"],  # unseeded, its steps (until the loss is small) change from run to run
}
ADVICE: dict[tuple[str, str], list[list[str]]] = {  # (script, verdict) -> the script's settings that apply the action
    ("char_gpt", "evaluation_heavy"): [["--eval-interval", "40"]],  # "evaluate 4 times less often"
    # on this 2-core machine workers would take the cores the CNN's compute uses: "make __getitem__ cheaper
    # (precompute, cache) ... or move the augmentation to the device"; the script's --precompute decodes, resizes and
    # normalises once and crops and jitters per sample (a part of the action), --augment-on-batch crops and jitters
    # each batch at once in the training process (the CPU is the device): both, the whole action
    ("image_classifier", "input_bound"): [["--precompute"], ["--precompute", "--augment-on-batch"]],
    ("tabular_mlp", "host_code_heavy"): [["--preprocess-once"]],  # the per-epoch pandas work out of the loop
    ("tabular_mlp", "outside_work"): [["--preprocess-once"]],
    # "a captured or compiled step (trainspeed.fit replays the step's ops without Python)": the script's --fit hands
    # each epoch's steps to trainspeed's fast loop, its preprocessing as before, with Adam(fused=True) so that no
    # host read stops the capture
    ("tabular_mlp", "launch_bound"): [["--fit"]],
    ("vae", "launch_bound"): [["--fit"]],  # the same: its epochs' steps by the fast loop, test pass and save as before
    # "torch.distributions checks its arguments ...: set_default_validate_args(False)", the setting host_code_heavy's
    # action names for a line inside torch.distributions (its prediction: the line's host time out of the step)
    ("policy_gradient", "host_code_heavy"): [["--no-validate"]],
    # small_batch's action for an agent (no prediction): act under no_grad, recompute the log-probabilities batched;
    # it also takes the log_prob line out of the step and runs backward once, so it removes the costs of
    # host_code_heavy and launch_bound together
    ("policy_gradient", "small_batch"): [["--batched-update"]],
    # "fewer dropout layers or dropout=0 ... compare the validation loss": the encoder's dropout at 0
    ("finetune_accum", "dropout_heavy"): [["--dropout", "0"]],
    # "DataLoader(..., num_workers=2, persistent_workers=True) and torch.set_num_threads(1)" (this 2-core machine)
    ("frame_rows", "input_bound"): [["--workers", "2", "--persistent", "--threads", "1"]],
    # "run the sequence through nn.LSTM(16, 64, batch_first=True) in one call instead of the nn.LSTMCell loop"
    ("sequence_cells", "launch_bound"): [["--fused"]],
    # healthy, and "with torch.autocast("cpu", dtype=torch.bfloat16): the forward and loss" (a CPU with native bf16):
    # the networks' forward passes under bf16 autocast, the losses in float32
    ("dcgan", "compute_bound"): [["--bf16"]],
    ("word_lm", "compute_bound"): [["--bf16"]],
    ("sine_lbfgs", "slow_dtype"): [["--float32"]],  # "train in float32: model.float() and inputs .float()"
    # "self.rnn = nn.LSTM(1, 51, num_layers=2, batch_first=True); out, state = self.rnn(x)": the two stacked cells'
    # weights in one layer, run over the input in one call (the future still fed back a step at a time)
    ("sine_lbfgs", "launch_bound"): [["--fused"]],
    # input_bound at the Pillow line: "precompute or cache this, or augment on the device": its rotation and blur done
    # to each batch in the training loop with torch (the CPU is the device), the resize as before
    ("pil_augment", "input_bound"): [["--augment-on-batch"]],
    ("skipgram", "optimizer_heavy"): [["--fused"]],  # "torch.optim.Adam(..., fused=True)"
}


def doctor(script: str) -> dict:  # type: ignore[type-arg]
    proc = subprocess.run([sys.executable, "-m", "trainspeed", "doctor", "--json", "-", str(HERE / f"{script}.py"),
                           *RUNS[script]], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


ADVISED_WHEN: dict[tuple[str, str], str] = {("sine_lbfgs", "launch_bound"): "nn.LSTM("}
"""A setting applies a verdict's action only where its fix says this (launch_bound's fix names the fused layer only
where that layer saves 5% of the step; else its fix is a larger batch, which no setting applies)."""
ENV_LEVERS = frozenset({"malloc"})
"""The levers that are environment variables (the verdict's `lever.settings`): the script runs unchanged with them."""


def run_seconds(script: str, extra: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(the script's training loop by its own clock, the whole process as a user times it: `python script.py`), with
    `env` added to the environment."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(HERE / f"{script}.py"), *RUNS[script], *extra],
                          capture_output=True, text=True, check=True, env={**os.environ, **(env or {})})
    whole = time.perf_counter() - t0
    found = re.search(r"training (?:time|loop): ([0-9.]+) s", proc.stdout)
    if found is None:
        raise SystemExit(f"{script} printed no training time")
    return float(found.group(1)), whole


def measure(name: str, advice: list[str], rounds: int,
            env: dict[str, str] | None = None) -> tuple[float, float, float, float, float]:
    """(median of the round-by-round gains, least, most, fastest round as given over fastest as advised) of the
    training loop, and the median round-by-round gain of the whole process; advised: the script's `advice` settings
    and the environment's `env`."""
    given, advised = [], []
    for _ in range(rounds):
        given.append(run_seconds(name, []))
        advised.append(run_seconds(name, advice, env))
    ratios = [g[0] / a[0] for g, a in zip(given, advised)]
    process = statistics.median(g[1] / a[1] for g, a in zip(given, advised))
    return (statistics.median(ratios), min(ratios), max(ratios), min(g[0] for g in given) / min(a[0] for a in advised),
            process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="", help="comma-separated script names (default: all)")
    args = parser.parse_args()
    names = [n for n in RUNS if not args.only or n in args.only.split(",")]
    print(measured_on(detect_hardware()) + f", {args.rounds} alternated rounds")
    print("| script | verdict | predicted | applied | measured [range] | fastest / fastest | error | process: predicted "
          "| process: measured | process: error |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        verdicts = doctor(name)["verdicts"]
        if not verdicts:
            print(f"| {name} | none | - | - | - | - | - | - | - | - |")
        # the first verdict, and any later one whose action the script has a setting for
        for i, verdict in enumerate(verdicts):
            settings = ADVICE.get((name, verdict["id"]))
            if ADVISED_WHEN.get((name, verdict["id"]), "") not in (verdict.get("fix") or ""):
                settings = None
            lever = verdict.get("lever") or {}
            env = lever["settings"] if lever.get("kind") in ENV_LEVERS else None
            if settings is None and env is not None:
                settings = [[]]  # the script as given, the verdict's environment variables set
            if i > 0 and settings is None:
                continue
            label = verdict["id"] + (" (first)" if i == 0 else "")
            predicted, whole = verdict["predicted_speedup"], verdict.get("predicted_process_speedup")
            shown = f"{predicted:.2f}x" if predicted is not None else "-"
            shown_whole = f"{whole:.2f}x" if whole is not None else "-"
            if settings is None:
                print(f"| {name} | {label} | {shown} | no single setting | - | - | - | {shown_whole} | - | - |")
                continue
            for advice in settings:
                measured, least, most, fastest, process = measure(name, advice, args.rounds, env)
                error = ("-" if predicted is None else
                         f"{predicted / measured - 1:+.0%}, {predicted / fastest - 1:+.0%}")
                whole_error = "-" if whole is None else f"{whole / process - 1:+.0%}"
                applied = " ".join([*(f"{k}={v}" for k, v in (env or {}).items()), *advice])
                print(f"| {name} | {label} | {shown} | `{applied}` | {measured:.2f}x [{least:.2f}, "
                      f"{most:.2f}] | {fastest:.2f}x | {error} | {shown_whole} | {process:.2f}x | {whole_error} |",
                      flush=True)


if __name__ == "__main__":
    main()
