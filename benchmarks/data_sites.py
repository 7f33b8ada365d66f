"""What the doctor says the DataLoader ran while the script waited (`data_sites`, stack samples) against each
transform timed on its own.

    python benchmarks/data_sites.py [--epochs 60] [--rounds 3] [--workers N]

The realistic image classifier (examples/realistic/image_classifier.py) makes each sample with five per-sample
transforms in its training process (num_workers=0). `trainspeed doctor --json` on it gives the samples taken
while the script waited on its DataLoader, by line; this benchmark sums them by the transform whose function holds
the line (the script's own source, parsed: a function, or a transform's class), and gives each transform's share of the samples in the five. Beside
it, each transform timed directly: the script's own transform functions applied to the training images one by one,
`time.perf_counter` around each, over `--rounds` passes (the least of them); its share of the five's time.
With `--workers N` the script's DataLoader makes the samples in N worker processes, and the doctor's samples are
those taken inside the workers while they made batches (`worker_sites`).
Prints a Markdown table for BENCHMARKS.md and the largest difference in points.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from bench_common import measured_on
from sklearn.datasets import load_digits

from trainspeed.hardware import detect_hardware

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "realistic" / "image_classifier.py"
TRANSFORMS = ("to_tensor", "Resize", "RandomCrop", "Brightness", "Normalize")
"""The script's transforms (a function, then nn.Modules), in the order its training Compose applies them."""


def enclosing(source: str) -> dict[int, str]:
    """Each line of the script -> what holds it: a top-level function's name, or a class's (its methods' lines)."""
    owner: dict[int, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                owner[line] = node.name
    return owner


def sampled(epochs: int, workers: int = 0) -> tuple[dict[str, float], int, dict[str, float]]:
    """The doctor's samples of the wait by transform (share of the samples in the five), how many samples in all,
    and the share of all samples of what is not one of the five (by its function or DataLoader machinery)."""
    run = subprocess.run([sys.executable, "-m", "trainspeed", "doctor", "--json", "-", str(SCRIPT), "--epochs",
                          str(epochs), "--workers", str(workers)], capture_output=True, text=True, check=True)
    sites = json.loads(run.stdout)["worker_sites" if workers else "data_sites"]
    owner = enclosing(SCRIPT.read_text())
    by: dict[str, int] = {}
    total = 0
    for site in sites:
        where, _, line = site["where"].rpartition(":")
        name = owner.get(int(line), "?") if where == str(SCRIPT) else (site["machinery"] or site["where"])
        by[name] = by.get(name, 0) + site["samples"]
        total += site["samples"]
    five = sum(by.get(t, 0) for t in TRANSFORMS)
    rest = {k: v / total for k, v in by.items() if k not in TRANSFORMS}
    return {t: by.get(t, 0) / five for t in TRANSFORMS}, total, rest


def timed(rounds: int) -> dict[str, float]:
    """Each transform's share of the five's time, each applied to the training images one by one (least of
    `rounds` passes per transform)."""
    spec = importlib.util.spec_from_file_location("image_classifier", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    argv, sys.argv = sys.argv, [str(SCRIPT)]
    try:
        spec.loader.exec_module(module)  # defines the transforms; main() runs only as __main__
    finally:
        sys.argv = argv
    steps = [module.to_tensor, module.Resize(32), module.RandomCrop(32, 4), module.Brightness(0.2),
             module.Normalize(0.3, 0.3)]
    images = (load_digits().images * 255 / 16).astype(np.uint8)[:1500]
    best = [float("inf")] * len(steps)
    for _ in range(rounds):
        spent = [0.0] * len(steps)
        for image in images:
            x = image
            for k, step in enumerate(steps):
                t0 = time.perf_counter()
                x = step(x)
                spent[k] += time.perf_counter() - t0
        best = [min(b, s) for b, s in zip(best, spent)]
    return {t: b / sum(best) for t, b in zip(TRANSFORMS, best)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=0, help="the script's DataLoader workers (0: in-process)")
    args = parser.parse_args()
    print(f"{measured_on(detect_hardware())}: `python benchmarks/data_sites.py --epochs {args.epochs} "
          f"--rounds {args.rounds} --workers {args.workers}`")
    shares, total, rest = sampled(args.epochs, args.workers)
    direct = timed(args.rounds)
    print(f"\n{total} stack samples of {'the workers making batches' if args.workers else 'the wait on data'}; "
          "outside the five transforms: "
          + ", ".join(f"{k} {v:.0%}" for k, v in sorted(rest.items(), key=lambda kv: -kv[1])))
    print("\n| transform | sampled share (doctor) | timed share (one by one) | difference |")
    print("|---|---|---|---|")
    for t in TRANSFORMS:
        print(f"| `{t}` | {shares[t]:.0%} | {direct[t]:.0%} | {100 * (shares[t] - direct[t]):+.0f} points |")
    print(f"\nlargest difference: {max(abs(shares[t] - direct[t]) for t in TRANSFORMS) * 100:.0f} points")


if __name__ == "__main__":
    main()
