"""Does `doctor --fix`'s patch, applied by hand, reproduce what `--try` measured? The example is copied into a git
repository of its own, diagnosed with `trainspeed doctor --fix --try`, the patch applied with `patch -p1`, and the
original and the patched script each run plainly (`python SCRIPT ARGS`, no trainspeed), alternated, for
BENCHMARKS.md's "The fix as a patch".

    python benchmarks/fix_reproduce.py [--runs 5] [--example checkpoint_every_step.py] [--doctor-steps 150] [-- ARGS]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import measured_on

from trainspeed.hardware import detect_hardware

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _timed(script: Path, args: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(script), *args], cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--example", default="checkpoint_every_step.py")
    p.add_argument("--doctor-steps", type=int, default=150, help="the doctor's --steps")
    p.add_argument("args", nargs="*", default=["--steps", "1000"])
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        (repo / "examples").mkdir(parents=True)
        (Path(tmp) / "original").mkdir()
        patched = repo / "examples" / a.example  # patched in place, as a user would
        original = Path(tmp) / "original" / a.example  # the copy left as it was
        shutil.copy(EXAMPLES / a.example, patched)
        shutil.copy(EXAMPLES / a.example, original)
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        subprocess.run([sys.executable, "-m", "trainspeed", "doctor", "--fix", "--try", "1", "--steps", str(a.doctor_steps),
                        "--json", str(Path(tmp) / "doctor.json"), "--", f"examples/{a.example}", *a.args],
                       cwd=repo, check=True, capture_output=True)
        data = json.loads((Path(tmp) / "doctor.json").read_text())
        row = data["tried"]["levers"][0]
        with open(data["patch"]["written"]) as diff:
            subprocess.run(["patch", "-p1"], stdin=diff, cwd=repo, check=True, capture_output=True)
        plain, fixed = [], []
        for i in range(a.runs):
            order = [(plain, original), (fixed, patched)] if i % 2 == 0 else [(fixed, patched), (plain, original)]
            for into, script in order:
                into.append(_timed(script, a.args, repo))
    ratios = [p_ / f_ for p_, f_ in zip(plain, fixed, strict=True)]
    print(f"{measured_on(detect_hardware())}; `python benchmarks/fix_reproduce.py --runs {a.runs} --example "
          f"{a.example} -- {' '.join(a.args)}`")
    print(f"- doctor --try on the patched copy ({row['verdict']}): predicted {row['predicted_speedup']:.2f}x, "
          f"measured {row['measured_speedup']:.2f}x [{row['interval'][0]:.2f}x, {row['interval'][1]:.2f}x] "
          f"(the training run, from its first step's end)")
    print(f"- plain runs after `patch -p1`, the whole process: original median {statistics.median(plain):.2f} s, "
          f"patched {statistics.median(fixed):.2f} s; speed-up {statistics.median(ratios):.2f}x "
          f"(runs' ratios {min(ratios):.2f}x to {max(ratios):.2f}x, {a.runs} alternated pairs)")


if __name__ == "__main__":
    main()
