"""The planted examples' verdicts alone and beside busy processes: does the doctor name the same problem first?

    python benchmarks/busy_machine.py                    # every planted example, alone then beside two busy loops
    python benchmarks/busy_machine.py --only checkpoint_every_step,log_every_step --busy 2
    python benchmarks/busy_machine.py --corpus --busy 1  # the realistic corpus: the verdict sets about the script

With `--corpus` the scripts are examples/realistic/ at the realistic benchmark's lengths (`realistic_gains.RUNS`),
and the table gives each run's verdicts about the script (the load's set aside) and whether the two runs name the
same set, with the verdicts only one of them names.

Each example runs under `trainspeed doctor --json` twice: alone, then beside `--busy` processes that spin
(`python -c "while True: pass"`) on the same cores. The table gives each run's first verdict about the script (a
`thread_oversubscription` that blames other processes is the load's verdict, set aside and shown in its own column),
the median step, and the phases' wait for a core per step (`phases.*.wait_ms`, summed) with its share of the step.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASES = [  # (script, its arguments, the planted verdict): tests/cli/test_doctor.py's planted examples
    ("seed_iris.py", ["--epochs", "1500"], "launch_bound"),
    ("slow_dataloader.py", [], "input_bound"),
    ("checkpoint_every_step.py", ["--steps", "60"], "checkpoint_heavy"),
    ("log_every_step.py", ["--steps", "1500"], "logging_heavy"),
    ("metric_every_step.py", ["--steps", "150"], "host_code_heavy"),
    ("float64_numpy.py", ["--steps", "150"], "slow_dtype"),
    ("tensor_dataset_loader.py", ["--epochs", "1"], "input_bound"),
    ("eval_too_often.py", ["--steps", "300"], "evaluation_heavy"),
]


def doctor(script: str, args: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "doctor.json"
        extra = ["--steps", "60"] if script == "slow_dataloader.py" else []
        subprocess.run([sys.executable, "-m", "trainspeed", "doctor", "--json", str(out), *extra,
                        str(ROOT / "examples" / script), *args], check=True, capture_output=True, timeout=600,
                       cwd=tmp)  # what a script saves lands in the temporary folder
        return json.loads(out.read_text())


def script_verdicts(data: dict[str, Any]) -> list[str]:
    """The report's verdicts about the script, in order: a thread_oversubscription that blames other processes (the
    load's verdict) set aside."""
    return [v["id"] for v in data["verdicts"]
            if not (v["id"] == "thread_oversubscription" and v["evidence"].startswith("other processes"))]


def summary(data: dict[str, Any]) -> dict[str, Any]:
    verdicts = [v["id"] for v in data["verdicts"]]
    load = [v for v in data["verdicts"]
            if v["id"] == "thread_oversubscription" and v["evidence"].startswith("other processes")]
    script = [v for v in verdicts if not (load and v == "thread_oversubscription")]
    waits = [p.get("wait_ms") for p in data["phases"].values()]
    wait = sum(w for w in waits if w is not None) if any(w is not None for w in waits) else None
    step = data["steps"]["mean_ms"] or data["steps"]["median_ms"]
    return {"first": script[0] if script else None, "rank_of_load": verdicts.index("thread_oversubscription") + 1
            if load else None, "median_ms": data["steps"]["median_ms"], "wait_ms": wait,
            "wait_share": wait / step if wait is not None and step else None,
            "others": data.get("others_cpu_cores")}


def busy(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def cell(s: dict[str, Any]) -> str:
    wait = f"{s['wait_ms']:.1f} ms ({s['wait_share']:.0%})" if s["wait_ms"] is not None else "not read"
    load = f"; load verdict {s['rank_of_load']}" if s["rank_of_load"] else ""
    return f"`{s['first']}`{load} | {s['median_ms']:.2f} ms | {wait}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated example names (without .py)")
    parser.add_argument("--busy", type=int, default=2, help="busy processes beside the second run (default 2)")
    parser.add_argument("--corpus", action="store_true", help="the realistic corpus: each run's verdict set")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    if args.corpus:
        return corpus(only, args.busy)
    cases = [c for c in CASES if only is None or c[0].removesuffix(".py") in only]
    print(f"Measured {time.strftime('%Y-%m-%d')} on {platform.processor() or platform.machine()}, "
          f"{__import__('os').cpu_count()} CPUs; beside {args.busy} busy processes.\n")
    print("| example | planted | alone: first verdict | median step | waits | busy: first verdict | median step | "
          "waits | same first |")
    print("|---|---|---|---:|---:|---|---:|---:|:---:|")
    same = 0
    for script, script_args, planted in cases:
        alone = summary(doctor(script, script_args))
        spinning = busy(args.busy)
        try:
            time.sleep(1.0)  # the busy processes have the cores before the run starts
            loaded = summary(doctor(script, script_args))
        finally:
            for p in spinning:
                p.kill()
                p.wait()
        same += alone["first"] == loaded["first"]
        print(f"| {script.removesuffix('.py')} | `{planted}` | {cell(alone)} | {cell(loaded)} | "
              f"{'yes' if alone['first'] == loaded['first'] else 'no'} |", flush=True)
    print(f"\n{same} of {len(cases)} examples got the same first verdict about the script alone and beside "
          f"{args.busy} busy processes.")
    return 0


def beside_busy(n: int, script: str, script_args: list[str]) -> dict[str, Any]:
    spinning = busy(n)
    try:
        time.sleep(1.0)  # the busy processes have the cores before the run starts
        return doctor(script, script_args)
    finally:
        for p in spinning:
            p.kill()
            p.wait()


def corpus(only: set[str] | None, n: int) -> int:
    """The realistic corpus alone and beside `n` busy processes: the verdict sets about the script."""
    from realistic_gains import RUNS

    names = [name for name in RUNS if only is None or name in only]
    print(f"Measured {time.strftime('%Y-%m-%d')} on {platform.processor() or platform.machine()}, "
          f"{__import__('os').cpu_count()} CPUs; beside {n} busy processes.\n")
    print("| script | alone: verdicts about the script | beside busy: verdicts about the script | load verdict | "
          "same set | only alone | only beside busy |")
    print("|---|---|---|:---:|:---:|---|---|")
    same = 0
    for name in names:
        script = f"realistic/{name}.py"
        alone, loaded = doctor(script, RUNS[name]), beside_busy(n, script, RUNS[name])
        a, b = script_verdicts(alone), script_verdicts(loaded)
        said = "yes" if len(script_verdicts(loaded)) < len(loaded["verdicts"]) else "no"
        same += set(a) == set(b)
        print(f"| {name} | {', '.join(a) or '-'} | {', '.join(b) or '-'} | {said} | "
              f"{'yes' if set(a) == set(b) else 'no'} | {', '.join(v for v in a if v not in b) or '-'} | "
              f"{', '.join(v for v in b if v not in a) or '-'} |", flush=True)
    print(f"\n{same} of {len(names)} scripts got the same set of verdicts about the script alone and beside {n} busy "
          "processes.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
