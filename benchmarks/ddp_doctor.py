"""The figures behind BENCHMARKS.md's data-parallel section: the doctor on examples/ddp_train.py.

    python benchmarks/ddp_doctor.py [--nproc 2] [--width 256]

Runs `torchrun --nproc-per-node N -m trainspeed doctor --json ... examples/ddp_train.py` balanced
and with a planted straggler (rank N-1 busy 5 ms more per step), and prints the measured
all-reduce time, exposed share, bus bandwidth, each rank's busy time, the first verdict and the
predicted scaling (ring model, labelled predicted).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def doctor(nproc: int, width: int, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "doctor.json"
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "-m",
                        "trainspeed", "doctor", "--json", str(out), "examples/ddp_train.py", "--width", str(width),
                        *extra], cwd=ROOT, check=True, capture_output=True, text=True, timeout=600)
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--width", type=int, default=256)
    args = parser.parse_args()
    print(f"Measured {datetime.date.today()}, CPU ranks (gloo), `torchrun --nproc-per-node {args.nproc}`, "
          f"examples/ddp_train.py --width {args.width}.\n")
    print("| run | step ms (rank 0) | all-reduce ms | exposed ms (least-waiting rank) | bus GB/s | busy ms per rank | "
          "first verdict |")
    print("|---|---:|---:|---:|---:|---|---|")
    scaling = ""
    for name, extra in (("balanced", []), ("straggler planted on the last rank", ["--slow-rank", str(args.nproc - 1)])):
        d = doctor(args.nproc, args.width, extra)
        dist = d["distributed"]
        least = min(dist["ranks"], key=lambda r: r["exposed_ms"])
        busy = ", ".join(f"{r['rank']}: {r['median_ms'] - r['exposed_ms']:.2f}" for r in dist["ranks"])
        first = d["verdicts"][0]["id"] if d["verdicts"] else "-"
        bus = f"{dist['bus_gbs']:.2f}" if dist["bus_gbs"] else "-"
        print(f"| {name} | {d['steps']['median_ms']:.2f} | {least['comm_ms']:.2f} | {least['exposed_ms']:.2f} | {bus} "
              f"| {busy} | {first} |")
        if name == "balanced" and dist["scaling"]:
            scaling = ", ".join(f"{p['world_size']}: {p['step_ms']:.2f} ms ({p['efficiency']:.0%})" for p in dist["scaling"])
    if scaling:
        print(f"\nPredicted step time (efficiency) by world size, ring all-reduce model, from the balanced run: {scaling}")


if __name__ == "__main__":
    main()
