"""`trainspeed doctor --try` on every example whose verdicts have a lever: each prediction against the gain the
feature itself measured, for BENCHMARKS.md's "Predictions against measured gains (`doctor --try`)".

    python benchmarks/try_all.py [--rounds 3] [--only too_many_threads,hf_trainer]

Each case runs `trainspeed doctor --try 1 --rounds R --steps S --json ... -- SCRIPT ARGS` in a process of its own
(the doctor then runs the script once to diagnose it and 2R times to try the first lever: alternated plain and
lever runs, each bounded by the same --steps). A case whose verdicts have no lever (an action that needs an edit of
the script's own loop) is listed with the edit `--try` shows. Prints a Markdown table: the verdict, its
prediction, the lever as applied, the measured speed-up with its 95% interval, whether the prediction is within
±25% of it (goal: 80% of the lever verdicts), and the losses' check.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import measured_on

from trainspeed.hardware import detect_hardware

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CASES: dict[str, tuple[str, list[str], int]] = {  # name -> (script under examples/, its arguments, doctor --steps)
    "too_many_threads": ("too_many_threads.py", ["--steps", "1000"], 150),
    "too_many_threads --threads 1": ("too_many_threads.py", ["--steps", "1000", "--threads", "1"], 150),
    "slow_dataloader": ("slow_dataloader.py", [], 60),
    "tensor_dataset_loader": ("tensor_dataset_loader.py", ["--epochs", "4"], 250),  # 3 ms steps: a timed second
    "lightning --val-check-interval 2": ("frameworks/lightning_trainer.py", ["--val-check-interval", "2"], 100),
    "lightning --every-n-train-steps 1": ("frameworks/lightning_trainer.py", ["--every-n-train-steps", "1"], 100),
    "lightning --log-every-n-steps 1": ("frameworks/lightning_trainer.py", ["--log-every-n-steps", "1"], 100),
    "hf_trainer --eval-steps 2": ("frameworks/hf_trainer.py", ["--max-steps", "60", "--eval-steps", "2"], 60),
    "hf_trainer --save-steps 1": ("frameworks/hf_trainer.py", ["--max-steps", "60", "--save-steps", "1"], 60),
    "hf_trainer --logging-steps 1": ("frameworks/hf_trainer.py", ["--max-steps", "60", "--logging-steps", "1"], 60),
    "eval_too_often": ("eval_too_often.py", ["--steps", "1000"], 300),
    "checkpoint_every_step": ("checkpoint_every_step.py", ["--steps", "1000"], 150),
    "seed_iris": ("seed_iris.py", ["--epochs", "3000"], 1500),
    "cnn_dataloader": ("cnn_dataloader.py", ["--images", "2000", "--workers", "0"], 40),
    "float64_numpy": ("float64_numpy.py", ["--steps", "600"], 150),
    "log_every_step": ("log_every_step.py", ["--steps", "3000"], 1500),
    "metric_every_step": ("metric_every_step.py", ["--steps", "400"], 150),
    "wide_mlp": ("wide_mlp.py", ["--steps", "40"], 25),
    # examples/realistic/, as benchmarks/realistic_gains.py runs them (sizes for a 2-core machine)
    "char_gpt": ("realistic/char_gpt.py", ["--max-iters", "60", "--eval-iters", "10"], 60),
    "image_classifier": ("realistic/image_classifier.py", ["--epochs", "2"], 60),
    "finetune_accum": ("realistic/finetune_accum.py", ["--steps", "40"], 40),
    "vae": ("realistic/vae.py", ["--epochs", "40"], 400),
    "policy_gradient": ("realistic/policy_gradient.py", ["--episodes", "30"], 60),
    "tabular_mlp": ("realistic/tabular_mlp.py", ["--epochs", "30"], 400),
    "frame_rows": ("realistic/frame_rows.py", ["--epochs", "4"], 100),
    "sequence_cells": ("realistic/sequence_cells.py", ["--steps", "300"], 150),
    "skipgram": ("realistic/skipgram.py", [], 200),
}


def run_case(name: str, rounds: int) -> dict:  # type: ignore[type-arg]
    script, args, steps = CASES[name]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "doctor.json"
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "trainspeed", "doctor", "--try", "1", "--rounds", str(rounds),
                               "--steps", str(steps), "--json", str(out), "--", str(EXAMPLES / script), *args],
                              capture_output=True, text=True, cwd=tmp)
        if done.returncode != 0 or not out.exists():
            return {"name": name, "error": (done.stderr.strip().splitlines() or ["?"])[-1]}
        data = json.loads(out.read_text())
    return {"name": name, "first": data["verdicts"][0]["id"] if data["verdicts"] else None, "tried": data["tried"],
            "seconds": time.perf_counter() - t0}


def _row(case: dict) -> str:  # type: ignore[type-arg]
    if "error" in case:
        return f"| {case['name']} | - | - | - | failed: {case['error']} | - | - |"
    tried = case["tried"]
    if not tried["levers"]:
        edit = tried["edits"][0] if tried["edits"] else None
        what = f"needs an edit: {edit['action'][:90]}" if edit else "; ".join(tried["notes"])
        return f"| {case['name']} | `{case['first']}` | - | {what} | not tried | - | - |"
    lever = tried["levers"][0]
    predicted, measured, within, losses = cells(lever)
    return (f"| {case['name']} | `{lever['verdict']}` | {predicted} | `{lever['applied_as']}` | {measured} | {within} "
            f"| {losses} |")


def cells(lever: dict) -> tuple[str, str, str, str]:  # type: ignore[type-arg]
    """A tried row's predicted, measured [95%], within ±25% and losses cells (fix_all.py's too)."""
    predicted = f"{lever['predicted_speedup']:.2f}x" if lever["predicted_speedup"] else "none"
    if lever["failed"]:
        measured = lever["failed"]
    else:
        low, high = lever["interval"] or (None, None)
        measured = f"**{lever['measured_speedup']:.2f}x**" + (f" [{low:.2f}x, {high:.2f}x]" if low else "")
    within = {True: "yes", False: "no", None: "-"}[lever["within_25_percent"]]
    return predicted, measured, within, lever["losses"]["text"] if lever["losses"] else "-"


def chosen(description: str) -> tuple[argparse.Namespace, list[str]]:
    """The command line's --rounds and --only, and the cases it names (fix_all.py's too)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", help="comma-separated case names")
    args = p.parse_args()
    return args, [n for n in CASES if not args.only or n in args.only.split(",")]


def main() -> None:
    args, names = chosen(__doc__.splitlines()[0])
    print(f"{measured_on(detect_hardware())}; `python benchmarks/try_all.py --rounds {args.rounds}`\n")
    print("| script | verdict | predicted | applied as | measured [95%] | within ±25% | losses |")
    print("|---|---|---:|---|---:|:---:|---|")
    cases = []
    for name in names:
        case = run_case(name, args.rounds)
        cases.append(case)
        print(_row(case), flush=True)
    judged = [c["tried"]["levers"][0] for c in cases if "tried" in c and c["tried"]["levers"]
              and c["tried"]["levers"][0]["within_25_percent"] is not None]
    within = sum(1 for row in judged if row["within_25_percent"])
    total = sum(c.get("seconds", 0.0) for c in cases)
    print(f"\n{within} of {len(judged)} lever verdicts predicted within ±25% of the gain `--try` measured "
          f"({total / 60:.0f} min in all).")


if __name__ == "__main__":
    main()
