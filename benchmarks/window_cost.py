"""What `trainspeed doctor --window A:B` costs the real run: a long script run plainly (`python SCRIPT`) and under the
doctor with a window that closes early, alternated; the script times its own steps (perf_counter around each step,
after it has read its loss) and writes them with its losses, for BENCHMARKS.md's "The real run: `--window`".

    python benchmarks/window_cost.py [--runs 5] [--steps 2000] [--window 50:150] [--width 256]

For each run: the median step before the window, inside it, and after it (steps B+50 to the end), the seconds the
steps after the window took in all, whether the report was on disk while the script still trained, and whether the
losses of the whole run are the plain run's bit for bit.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_common import measured_on

from trainspeed.hardware import detect_hardware

SCRIPT = """
import json, os, sys, time
import torch

steps, width, out, report = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                            torch.nn.ReLU(), torch.nn.Linear(width, 10))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(128, width), torch.randint(0, 10, (128,))
times, losses, seen_at = [], [], None
for step in range(steps):
    t0 = time.perf_counter()
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
    times.append(time.perf_counter() - t0)
    if seen_at is None and os.path.exists(report):
        seen_at = step
json.dump({"times": times, "losses": [float.hex(v) for v in losses], "report_seen_at": seen_at}, open(out, "w"))
"""


def _run(command: list[str], cwd: Path) -> None:
    subprocess.run(command, cwd=cwd, check=True, capture_output=True, timeout=1800)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--window", default="50:150")
    p.add_argument("--width", type=int, default=256)
    a = p.parse_args()
    start, stop = (int(v) for v in a.window.split(":"))
    after = stop + 50
    rows: dict[str, list[dict[str, float]]] = {"plain": [], "window": []}
    losses: dict[str, set[tuple[str, ...]]] = {"plain": set(), "window": set()}
    seen: list[int | None] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        script = folder / "train.py"
        script.write_text(SCRIPT)
        for i in range(a.runs):
            for arm in (("plain", "window") if i % 2 == 0 else ("window", "plain")):
                out, report = folder / f"{arm}-{i}.json", folder / f"report-{i}.json"
                args = [str(a.steps), str(a.width), str(out), str(report)]
                if arm == "plain":
                    _run([sys.executable, str(script), *args], folder)
                else:
                    _run([sys.executable, "-m", "trainspeed", "doctor", "--window", a.window, "--json", str(report),
                          "--", str(script), *args], folder)
                data = json.loads(out.read_text())
                t = [v * 1e3 for v in data["times"]]
                rows[arm].append({"before": statistics.median(t[10:start]), "inside": statistics.median(t[start:stop]),
                                  "after": statistics.median(t[after:]), "after_s": sum(t[after:]) / 1e3})
                losses[arm].add(tuple(data["losses"]))
                if arm == "window":
                    seen.append(data["report_seen_at"])
    print(f"{measured_on(detect_hardware())}; `python benchmarks/window_cost.py --runs {a.runs} --steps {a.steps} "
          f"--window {a.window} --width {a.width}`")
    print("| | plain | `--window " + a.window + "` |\n|---|---:|---:|")
    for key, label in (("before", f"median step, steps 10-{start} (ms)"),
                       ("inside", f"median step, steps {start}-{stop} (ms)"),
                       ("after", f"median step, steps {after}-{a.steps} (ms)"),
                       ("after_s", f"steps {after}-{a.steps} in all (s)")):
        cells = [", ".join(f"{r[key]:.3f}" for r in rows[arm]) for arm in ("plain", "window")]
        print(f"| {label} | {cells[0]} | {cells[1]} |")
    plain_after = [r["after"] for r in rows["plain"]]
    window_after = [r["after"] for r in rows["window"]]
    print(f"- after the window: median of the runs' medians {statistics.median(window_after):.4f} ms against plain "
          f"{statistics.median(plain_after):.4f} ms (plain runs' own spread {min(plain_after):.4f} to "
          f"{max(plain_after):.4f} ms)")
    print(f"- report on disk at step {seen} of each windowed run (the window closed after step {stop - 1})")
    same = len(losses["plain"] | losses["window"]) == 1
    print(f"- losses of all {a.steps} steps in every run: {'bit-identical' if same else 'DIFFERENT'} "
          f"({len(losses['plain'])} plain, {len(losses['window'])} windowed distinct sequences)")


if __name__ == "__main__":
    main()
