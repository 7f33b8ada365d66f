"""What one timed host read costs the doctor when the loop runs at a script's module level.

    python benchmarks/doctor_read_site.py
    python benchmarks/doctor_read_site.py --rounds 3   # and the whole loop, plain vs under the doctor

Many training scripts keep their loop at module level, so each `loss.item()` is made by the
script's module code object. The doctor tallies reads per call site; keying that tally by the
code object itself hashes the object on every read, and a code object's hash walks its constants
and names, including every function defined in the script. This times `Watcher.host_read` (the
callback behind every counted read, hot: 5 x 20 000 calls, best of 5) on a frame of a module-level
script of about 3 000 lines (torch's own nn/modules/module.py, compiled under a user path) and of
a small function.

With `--rounds N`, also the end-to-end figure: a generated 1 800-line script (600 small helper
functions, then the seed's Iris loop at module level: 300 steps untimed, 5 000 timed with
perf_counter inside the script), run N times as `python SCRIPT` and as `trainspeed doctor SCRIPT`,
alternating, each a fresh process.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import timeit

import torch

from trainspeed.watch import Watcher


def frame_of_big_script() -> object:
    path = os.path.join(os.path.dirname(torch.__file__), "nn", "modules", "module.py")
    with open(path) as f:
        source = f.read() + "\nimport sys as _sys\nFRAME = _sys._getframe()\n"
    scope: dict[str, object] = {"__name__": "train_big"}
    exec(compile(source, os.path.join(os.path.expanduser("~"), "train_big.py"), "exec"), scope)
    return scope["FRAME"]


def per_read_us(frame: object, n: int = 20_000) -> float:
    w = Watcher(warmup=0, profile_steps=0)
    w.host_read("item", 0.0, 0.0, frame)  # the first read of a site works it out: not timed
    return min(timeit.repeat(lambda: w.host_read("item", 0.0, 0.0, frame), number=n, repeat=5)) / n * 1e6


LOOP = """
import time
import torch
from torch import nn
from trainspeed.workloads import load_iris_split, make_iris_mlp
d = load_iris_split()
model = make_iris_mlp(seed=0)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []
for step in range(5300):
    if step == 300:
        t0 = time.perf_counter()
    loss = criterion(model(d.x_train), d.y_train)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
print(f"LOOP {time.perf_counter() - t0:.4f}")
"""


def module_level_loop(rounds: int) -> None:
    helpers = "\n".join(f"def helper_{i}(x, y=({i}, 'a{i}', {i}.5)):\n    return [x * {i}, y, 'h{i}']\n"
                        for i in range(600))
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "train_big.py")
        with open(script, "w") as f:
            f.write(helpers + LOOP)
        arms = {"python SCRIPT": [sys.executable, script],
                "trainspeed doctor SCRIPT": [sys.executable, "-m", "trainspeed", "doctor", script]}
        times: dict[str, list[float]] = {arm: [] for arm in arms}
        for _ in range(rounds):
            for arm, cmd in arms.items():
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                times[arm].append(float(next(ln for ln in out.splitlines() if ln.startswith("LOOP")).split()[1]))
    base = statistics.median(times["python SCRIPT"])
    for arm, ts in times.items():
        med = statistics.median(ts)
        print(f"{arm}: 5 000 steps in {med:.3f} s (median of {', '.join(f'{t:.2f}' for t in ts)}), "
              f"{(med / base - 1) * 100:+.1f}% vs plain")


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=0, help="also time the whole loop this many times per arm")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}")
    print(f"host_read from a ~3 000-line script's module level: {per_read_us(frame_of_big_script()):.2f} µs per read")
    print(f"host_read from a small function:                    {per_read_us(sys._getframe()):.2f} µs per read")
    if args.rounds:
        module_level_loop(args.rounds)


if __name__ == "__main__":
    main()
