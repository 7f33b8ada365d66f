"""The doctor's FSDP levers, predicted on a planted run and measured: one sharding unit per layer of a deep, thin model
on 2 CPU ranks (gloo), then the two changes its `comm_bound` verdict offers, each run as it says.

    python benchmarks/fsdp_levers.py [--rounds 3] [--depth 32]

First `torchrun --nproc-per-node 2 -m trainspeed doctor examples/fsdp_train.py` (one unit per block): each lever's
saving, from the report's own figures (the rule's arithmetic: diagnose/rules/sharded.py). Then, alternated over
rounds, the script alone with one unit per block, with `--blocks-per-unit 4` (the larger units the verdict names)
and with `--no-reshard` (reshard_after_forward=False); each run's median step by the script's own clock (its epochs
after the first). The predicted speed-up of a lever is the doctor's median step over that step less the saving.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_common import measured_on

from trainspeed.diagnose.rules.sharded import keep_gathered, larger_units
from trainspeed.hardware import detect_hardware
from trainspeed.watch.dist_result import GROUP, CallProbe, CollectiveStat, DistRun, FsdpLayout

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "examples" / "fsdp_train.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")


def plain_step_ms(args: list[str], tmp: str) -> float:
    times = os.path.join(tmp, "times.json")
    subprocess.run([*TORCHRUN, SCRIPT, *args, "--times", times], check=True, env=_env(),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return float(json.loads(Path(times).read_text())["median_step_ms"])


def dist_run(d: dict) -> DistRun:
    """The report's `distributed` section as the rule reads it (what the levers need)."""
    return DistRun(d["world_size"], d["backend"], d["rank"], d["grad_bytes"], None, None, None, None, [], [], [],
                   [CollectiveStat(**c) for c in d["collectives"]], [CallProbe(**p) for p in d["call_probes"]],
                   d["fsdp_host_ms"], FsdpLayout(**d["fsdp"]) if d["fsdp"] else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--depth", type=int, default=32)
    args = parser.parse_args()
    print(measured_on(detect_hardware(), "cpu"))
    base = ["--depth", str(args.depth)]
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "doctor.json")
        subprocess.run([*TORCHRUN, "-m", "trainspeed", "doctor", "--json", report, SCRIPT, *base], check=True,
                       env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        doc = json.loads(Path(report).read_text())
        step = doc["steps"]["median_ms"]
        d = dist_run(doc["distributed"])
        stats = {s.kind: s for s in d.collectives}
        saved = {"larger": larger_units(d, stats), "keep": keep_gathered(d, stats)}
        first = doc["verdicts"][0] if doc["verdicts"] else {"id": "none"}
        comm = doc["phases"]["comm"]["share"] * step
        print(f"\ndoctor, one unit per block: median step {step:.2f} ms, comm {comm:.2f} ms; first verdict "
              f"{first['id']}; FSDP's host work {sum(d.fsdp_host_ms.values()):.2f} ms a step")
        runs = {"one unit per block": base, f"{GROUP} blocks per unit": [*base, "--blocks-per-unit", str(GROUP)],
                "reshard_after_forward=False": [*base, "--no-reshard"]}
        measured: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, run_args in runs.items():
                measured[name].append(plain_step_ms(run_args, tmp))
    before = statistics.median(measured["one unit per block"])
    print("\n| run | median step ms (each round) | measured speed-up | predicted saving ms | predicted speed-up |")
    print("|---|---|---:|---:|---:|")
    for name, lever in (("one unit per block", None), (f"{GROUP} blocks per unit", "larger"),
                        ("reshard_after_forward=False", "keep")):
        ms = statistics.median(measured[name])
        got = saved.get(lever) if lever else None
        predicted = (f"{got[0]:.2f} | {step / (step - got[0]):.2f}x" if got is not None else
                     ("- | -" if lever is None else "not predicted | -"))
        print(f"| {name} | {', '.join(f'{m:.2f}' for m in measured[name])} | {before / ms:.2f}x | {predicted} |")


if __name__ == "__main__":
    main()
