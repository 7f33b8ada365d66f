"""`trainspeed compare` as a regression gate: a real 10% slowdown told from run-to-run noise on this machine.

    python benchmarks/compare_gate.py [--steps 1500] [--slowdown 0.10] [--gate 5] [--rounds 3]

Writes a small training script (an MLP on random data, a few milliseconds a step) with an option that spins
the host for a given time each step, and runs `trainspeed doctor --out` on it in rounds: A and C as written,
B spinning for `--slowdown` of the first A's median step, in the order A C B each round, so a drift of the
machine reaches all three. Then `trainspeed compare --fail-if-slower GATE` judges, with its JSON:
- each round's C and B against that round's A, one run a side (the +/-5% noise band stands in for the
  run-to-run spread);
- all of C and all of B against all of A, several runs a side (the interval resamples the runs).
C should pass and be "no real difference", B should fail and be "slower", by about the slowdown."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_common import measured_on

from trainspeed.hardware import detect_hardware

SCRIPT = '''
import argparse, time
import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=1500)
p.add_argument("--spin-ms", type=float, default=0.0)
args = p.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 256), torch.randint(0, 10, (256,))
for step in range(args.steps):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if args.spin_ms:  # the planted slowdown: host work on every step
        end = time.perf_counter() + args.spin_ms / 1e3
        while time.perf_counter() < end:
            pass
'''


def _doctor(script: Path, out: Path, steps: int, spin_ms: float) -> Path:
    """One `trainspeed doctor --out` run into `out`; the folder it made."""
    before = set(out.glob("doctor-*"))
    cmd = [sys.executable, "-m", "trainspeed", "doctor", "--out", str(out), str(script), "--steps", str(steps),
           "--spin-ms", str(spin_ms)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (made,) = set(out.glob("doctor-*")) - before
    return made


def _compare(a: Path, b: Path, gate: float) -> tuple[int, dict]:  # type: ignore[type-arg]
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        done = subprocess.run([sys.executable, "-m", "trainspeed", "compare", "--json", out.name, str(a), str(b),
                               "--fail-if-slower", str(gate)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return done.returncode, json.loads(Path(out.name).read_text())


def _line(what: str, code: int, result: dict) -> str:  # type: ignore[type-arg]
    step = result["step"]
    return (f"{what}: exit {code}, {result['conclusion']}: change {step['change']:+.2%}, 95% interval "
            f"{step['low']:+.2%} to {step['high']:+.2%}, band +/-{result['noise']:.0%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--slowdown", type=float, default=0.10, help="the planted slowdown, a share of A's step")
    parser.add_argument("--gate", type=float, default=5.0, help="--fail-if-slower PCT")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of A, C (as written) and B (slowed)")
    args = parser.parse_args()
    print(measured_on(detect_hardware()) + ", CPU")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        script = root / "train.py"
        script.write_text(SCRIPT)
        spin = None
        runs: dict[str, list[Path]] = {"A": [], "C": [], "B": []}
        for _ in range(args.rounds):
            runs["A"].append(_doctor(script, root / "A", args.steps, 0.0))
            if spin is None:
                spin = args.slowdown * json.loads((runs["A"][0] / "doctor.json").read_text())["steps"]["median_ms"]
                print(f"first A: B spins {spin:.3f} ms a step ({args.slowdown:.0%} of its median step)")
            runs["C"].append(_doctor(script, root / "C", args.steps, 0.0))
            runs["B"].append(_doctor(script, root / "B", args.steps, spin))
        for i, (a, c, b) in enumerate(zip(runs["A"], runs["C"], runs["B"]), 1):
            print(_line(f"round {i}, C against A", *_compare(a, c, args.gate)))
            print(_line(f"round {i}, B against A", *_compare(a, b, args.gate)))
        print(_line(f"all {args.rounds} C against all A", *_compare(root / "A", root / "C", args.gate)))
        print(_line(f"all {args.rounds} B against all A", *_compare(root / "A", root / "B", args.gate)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
