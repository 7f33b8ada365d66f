"""The figures behind BENCHMARKS.md's demo table: run the seed experiment, print Markdown.

    python benchmarks/demo_table.py                      # 20 000 epochs, every available device
    python benchmarks/demo_table.py --devices cuda --epochs 20000
"""

from __future__ import annotations

import argparse
import platform

import torch
from bench_common import measured_on

from trainspeed.demo import SEED_EPOCHS, run_demo
from trainspeed.hardware import detect_hardware


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=SEED_EPOCHS)
    parser.add_argument("--devices", default="cpu,cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    hw = detect_hardware()
    result = run_demo(args.devices.split(","), epochs=args.epochs)
    gpus = ", ".join(g.name for g in hw.gpu.gpus) or "no GPU"
    print(f"{measured_on(hw)}, {gpus}; torch {hw.torch_version}, "
          f"{torch.get_num_threads()} intra-op threads, Python {platform.python_version()}.\n")
    print("| device | variant | seconds | us/epoch | host reads | final loss | test acc |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in result.runs:
        print(f"| {r.device} | {r.variant} | {r.seconds:.3f} | {r.us_per_epoch:.1f} | {r.syncs} | "
              f"{r.final_loss:.6f} | {r.test_accuracy:.1%} |")
    print()
    for line in result.explanation:
        print(f"- {line}")


if __name__ == "__main__":
    main()
