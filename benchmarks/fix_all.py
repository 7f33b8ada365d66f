"""`trainspeed doctor --fix --try` on every example `benchmarks/try_all.py` runs: whether its first verdict's fix
became a patch (or why not), whether `git apply --check` takes the patch, and the patched script's measured
speed-up beside the prediction, for BENCHMARKS.md's "The fix as a patch (`doctor --fix --try`)".

    python benchmarks/fix_all.py [--rounds 3] [--only checkpoint_every_step,log_every_step]

Each case runs `trainspeed doctor --fix PATCH --try 1 --rounds R --steps S --json ... -- SCRIPT ARGS` in a process of
its own: the diagnosis, then 2R runs alternated, plain and the first verdict's fix (its patched copy of the script
where the fix is an edit, else its lever), each bounded by the same --steps. Prints a Markdown table: the verdict
tried (the first with a patch or a lever), its edit (or "no patch: why"), `git apply --check` of the whole patch,
the prediction, the measured speed-up with its 95% interval, whether the prediction is within ±25% of it, and the
losses' check.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import measured_on
from try_all import CASES, EXAMPLES, cells, chosen

from trainspeed.hardware import detect_hardware

ROOT = EXAMPLES.parent


def run_case(name: str, rounds: int) -> dict:  # type: ignore[type-arg]
    script, args, steps = CASES[name]
    with tempfile.TemporaryDirectory() as tmp:
        out, patch = Path(tmp) / "doctor.json", Path(tmp) / "fix.patch"
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "trainspeed", "doctor", "--fix", str(patch), "--try", "1",
                               "--rounds", str(rounds), "--steps", str(steps), "--json", str(out), "--",
                               str(EXAMPLES / script), *args], capture_output=True, text=True, cwd=tmp)
        if done.returncode != 0 or not out.exists():
            return {"name": name, "error": (done.stderr.strip().splitlines() or ["?"])[-1]}
        data = json.loads(out.read_text())
        applies = None
        if patch.exists():
            check = subprocess.run(["git", "apply", "--check", str(patch)], cwd=ROOT, capture_output=True, text=True)
            applies = check.returncode == 0 or check.stderr.strip()
    return {"name": name, "data": data, "applies": applies, "seconds": time.perf_counter() - t0}


def _row(case: dict) -> str:  # type: ignore[type-arg]
    if "error" in case:
        return f"| {case['name']} | - | failed: {case['error']} | - | - | - | - | - |"
    data = case["data"]
    lever = data["tried"]["levers"][0] if data["tried"] and data["tried"]["levers"] else None
    first = lever["verdict"] if lever else data["verdicts"][0]["id"] if data["verdicts"] else None  # the one tried
    patch = data["patch"] or {"hunks": [], "skipped": []}
    hunk = next((h for h in patch["hunks"] if h["verdict"] == first), None)
    skipped = next((s for s in patch["skipped"] if s["verdict"] == first), None)
    a, b = hunk["lines"] if hunk else (0, 0)
    edit = (f"{'line' if a == b else 'lines'} {a if a == b else f'{a}-{b}'}: {hunk['said']}" if hunk else
            f"no patch: {skipped['reason']}" if skipped else "-")
    applies = {True: "yes", None: "-"}.get(case["applies"], f"no: {case['applies']}")
    if lever is None:
        return f"| {case['name']} | `{first}` | {edit} | {applies} | - | not tried | - | - |"
    tried_as = "patch" if lever["kind"] == "patch" else f"lever `{lever['applied_as']}`"
    predicted, measured, within, losses = cells(lever)
    return (f"| {case['name']} | `{lever['verdict']}` | {edit} | {applies} | {predicted} | {tried_as}: {measured} "
            f"| {within} | {losses} |")


def main() -> None:
    args, names = chosen(__doc__.splitlines()[0])
    print(f"{measured_on(detect_hardware())}; `python benchmarks/fix_all.py --rounds {args.rounds}`\n")
    print("| script | verdict | patch | `git apply --check` | predicted | tried as: measured [95%] | within ±25% "
          "| losses |")
    print("|---|---|---|:---:|---:|---|:---:|---|")
    cases = []
    for name in names:
        case = run_case(name, args.rounds)
        cases.append(case)
        print(_row(case), flush=True)
    patched = [c["data"]["tried"]["levers"][0] for c in cases if "data" in c and c["data"]["tried"]
               and c["data"]["tried"]["levers"] and c["data"]["tried"]["levers"][0]["kind"] == "patch"]
    judged = [row for row in patched if row["within_25_percent"] is not None]
    within = sum(1 for row in judged if row["within_25_percent"])
    applied = sum(1 for c in cases if c.get("applies") is True)
    total = sum(c.get("seconds", 0.0) for c in cases)
    print(f"\n{applied} patch{'' if applied == 1 else 'es'} written that `git apply --check` takes; {len(patched)} "
          f"first verdicts tried as their patch, {within} of {len(judged)} predicted within ±25% of the measured gain "
          f"({total / 60:.0f} min in all).")


if __name__ == "__main__":
    main()
