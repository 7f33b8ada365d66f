"""The doctor inside Lightning's and Hugging Face's Trainer: each planted bottleneck's first verdict, its predicted
gain against the gain measured by applying the setting its action names; and the cost of watching.

    python benchmarks/framework_gains.py [--rounds 5] [--only lightning,hf] [--planted TEXT]  # predicted, measured
    python benchmarks/framework_gains.py --overhead [--rounds 5]               # plain against watched
    python benchmarks/framework_gains.py --device cuda --planted log --json-dir out  # logging every step, on a GPU

For each planted run of examples/frameworks/: `trainspeed doctor --json` names the first verdict and its predicted
speed-up; the setting its action names (with the figure in it: `val_check_interval=8`, `save_steps=20`) is
applied, and the script runs as planted and as advised, in turn for `--rounds` rounds, each in its own process,
timed by the script's own "training time" line (`trainer.fit` / `trainer.train`, imports and data set-up left
out). The measured gain is the median of the round by round ratios; the error is predicted / measured - 1 (goal:
within +/-25%). `--overhead` times the healthy runs plain and under `trainspeed doctor`, alternated (the bound:
5%). Prints Markdown tables for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bench_common import measured_on

from trainspeed.hardware import detect_hardware

HERE = Path(__file__).resolve().parents[1] / "examples" / "frameworks"
SCRIPTS = {"lightning": "lightning_trainer.py", "hf": "hf_trainer.py"}
HF_STEPS = ["--max-steps", "40"]


def _number(pattern: str) -> Callable[[str], list[str]]:
    """The advised run's flag from the figure in the action ("every_n_train_steps=11" -> that flag and 11)."""
    setting, flag = pattern.split("->")

    def advised(action: str) -> list[str]:
        found = re.search(re.escape(setting) + r"=(\d+)", action)
        if found is None:
            raise SystemExit(f"no {setting}=N in the action: {action}")
        return [flag, found.group(1)]
    return advised


# (framework, planted flags, first verdict expected) -> the advised run's flags, from the verdict's action
PLANTED: dict[tuple[str, tuple[str, ...], str], Callable[[str], list[str]]] = {
    ("lightning", ("--val-check-interval", "2"), "evaluation_heavy"): _number("val_check_interval->--val-check-interval"),
    ("lightning", ("--every-n-train-steps", "1"), "checkpoint_heavy"):
        _number("every_n_train_steps->--every-n-train-steps"),
    # "augment whole batches in LightningModule.on_after_batch_transfer"
    ("lightning", ("--augment-in-loader",), "input_bound"): lambda action: ["--augment-on-batch"],
    ("hf", ("--eval-steps", "2"), "evaluation_heavy"): _number("eval_steps->--eval-steps"),
    ("hf", ("--save-steps", "1"), "checkpoint_heavy"): _number("save_steps->--save-steps"),
    # "tokenize once, before training": the script's default (its one-time tokenization is before the timed loop)
    ("hf", ("--tokenize-in-loader",), "input_bound"): lambda action: [],
    # "TrainingArguments(activation_checkpointing=False)": the script's default
    ("hf", ("--activation-checkpointing",), "recompute_heavy"): lambda action: [],
    # logging every step: a read of the loss from the GPU each step (the Trainers' logs call .item())
    ("lightning", ("--log-every-n-steps", "1"), "sync_bound"): _number("log_every_n_steps->--log-every-n-steps"),
    ("hf", ("--logging-steps", "1"), "sync_bound"): _number("logging_steps->--logging-steps"),
}
GPU_ONLY = {("--log-every-n-steps", "1"), ("--logging-steps", "1")}


DEVICE = "cpu"
JSON_DIR: Path | None = None


def _base(framework: str) -> list[str]:
    """The script's length and device: on a GPU the Trainer's 40 steps take a fraction of a second, too short to
    time, so it runs 120 (Lightning's script runs 120 anyway)."""
    steps = (["--max-steps", "120"] if DEVICE == "cuda" else HF_STEPS) if framework == "hf" else []
    return steps + ["--device", DEVICE]


def doctor(framework: str, flags: list[str]) -> dict:  # type: ignore[type-arg]
    proc = subprocess.run([sys.executable, "-m", "trainspeed", "doctor", "--json", "-", str(HERE / SCRIPTS[framework]),
                           *_base(framework), *flags], capture_output=True, text=True, check=True)
    if JSON_DIR is not None:  # the whole report, for reading later
        JSON_DIR.mkdir(parents=True, exist_ok=True)
        name = "-".join([framework, DEVICE, *(f.strip("-") for f in flags)]) + ".json"
        (JSON_DIR / name).write_text(proc.stdout)
    return json.loads(proc.stdout)


def loop_seconds(framework: str, flags: list[str], watched: bool = False) -> float:
    doctor_args = [sys.executable, "-m", "trainspeed", "doctor"] if watched else [sys.executable]
    proc = subprocess.run([*doctor_args, str(HERE / SCRIPTS[framework]), *_base(framework), *flags],
                          capture_output=True, text=True, check=True)
    found = re.search(r"training time: ([0-9.]+) s", proc.stdout + proc.stderr)
    if found is None:
        raise SystemExit(f"{SCRIPTS[framework]} printed no training time")
    return float(found.group(1))


def gains(frameworks: list[str], rounds: int, planted_like: str = "") -> None:
    print("| framework | planted | first verdict | predicted | applied | measured [range] | error |")
    print("|---|---|---|---|---|---|---|")
    for (framework, planted, expected), advise in PLANTED.items():
        if framework not in frameworks or planted_like not in " ".join(planted):
            continue
        if planted in GPU_ONLY and DEVICE == "cpu":
            continue
        verdicts = doctor(framework, list(planted))["verdicts"]
        first = verdicts[0] if verdicts else None
        named = first is not None and first["id"] == expected and first["predicted_speedup"] is not None
        advice = advise(first["action"]) if named and first is not None else []
        ratios = [loop_seconds(framework, list(planted)) / loop_seconds(framework, advice) for _ in range(rounds)]
        measured = statistics.median(ratios)
        if first is not None and named:
            predicted = first["predicted_speedup"]
            said, error = f"{expected} | {predicted:.2f}x", f"{predicted / measured - 1:+.0%}"
        else:
            said, error = f"{first['id'] if first else 'none'} (not {expected}) | -", "-"
        print(f"| {framework} | `{' '.join(planted)}` | {said} | `{' '.join(advice) or '(default)'}` "
              f"| {measured:.2f}x [{min(ratios):.2f}, {max(ratios):.2f}] | {error} |", flush=True)


def overhead(frameworks: list[str], rounds: int) -> None:
    print("| framework | plain (median) | watched (median) | overhead [range of round ratios] |")
    print("|---|---:|---:|---|")
    for framework in frameworks:
        plain, watched = [], []
        for _ in range(rounds):
            plain.append(loop_seconds(framework, []))
            watched.append(loop_seconds(framework, [], watched=True))
        ratios = [w / p - 1 for p, w in zip(plain, watched)]
        print(f"| {framework} | {statistics.median(plain):.3f} s | {statistics.median(watched):.3f} s | "
              f"{statistics.median(ratios):+.1%} [{min(ratios):+.1%}, {max(ratios):+.1%}] |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="lightning,hf", help="comma-separated: lightning, hf")
    parser.add_argument("--planted", default="", help="only the planted runs whose flags hold this text")
    parser.add_argument("--overhead", action="store_true", help="plain against watched instead")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where the scripts train")
    parser.add_argument("--json-dir", type=Path, help="keep each doctor report here")
    args = parser.parse_args()
    global DEVICE, JSON_DIR
    DEVICE, JSON_DIR = args.device, args.json_dir
    frameworks = [f for f in SCRIPTS if f in args.only.split(",")]
    print(measured_on(detect_hardware(), args.device) + f", {args.rounds} alternated rounds")
    if args.overhead:
        overhead(frameworks, args.rounds)
    else:
        gains(frameworks, args.rounds, args.planted)


if __name__ == "__main__":
    main()
