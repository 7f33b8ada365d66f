"""The scripted list of bad inputs a newcomer types, every command's: each runs `python -m trainspeed` in its own
process and must answer with exit status 2, one line on stderr and no traceback. A process of its own sees what
the in-process tests cannot: what torch's C++ and loggers write to file descriptor 2, and an exception that
escapes `main`.

A new bad input found: add its line here (the in-process tests of each command check the message's wording)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SRC = Path(__file__).resolve().parents[2] / "src"

BAD = [
    # the command line itself
    [],
    ["warp"],
    ["--no-such-flag"],
    # hw, demo
    ["hw", "--json"],
    ["hw", "--json", "/proc/x/hw.json"],
    ["demo", "--epochs", "0"],
    ["demo", "--epochs", "100000000000000000000"],
    ["demo", "--devices", "tpu"],
    # doctor
    ["doctor"],
    ["doctor", "no_such_script.py"],
    ["doctor", "."],
    ["doctor", "--steps", "0", str(EXAMPLES / "seed_iris.py")],
    ["doctor", "--steps", "99999999999999", str(EXAMPLES / "seed_iris.py")],
    ["doctor", "--json", "/proc/x", str(EXAMPLES / "seed_iris.py")],
    ["doctor", "-m", "no_such_module_xyz"],
    # memory
    ["memory", "mystery"],
    ["memory", "iris-mlp", "--input-shape", "3,32,32"],
    ["memory", "gpt", "--batch-size", "100000000000000"],
    ["memory", "iris-mlp", "--budget", "-1GiB"],
    ["memory", "iris-mlp", "--budget=-1GiB"],
    ["memory", "iris-mlp", "--budget", "24XB"],
    ["memory", "iris-mlp", "--margin", "1.5"],
    ["memory", "iris-mlp", "--optimizer", "lion"],
    # sweep
    ["sweep", "warp-speed", "--workload", "iris"],
    ["sweep", "threads", "--workload", "imagenet"],
    ["sweep", "device", "--workload", "iris", "--gpu", "Voodoo 5"],
    # compare
    ["compare", "no_such_a.json", "no_such_b.json"],
    ["compare", "{report}", "{report}", "--fail-if-slower", "nan"],
    ["compare", "{report}", "{report}", "--noise", "inf"],
    ["compare", "{report}", "{schema_only}"],
]


@pytest.mark.parametrize("argv", BAD, ids=lambda argv: " ".join(argv) or "(nothing)")
def test_a_bad_input_is_one_line_and_status_2(argv: list[str], tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text('{"schema": "trainspeed.doctor/1", "steps": {"median_ms": 1.0}, "samples": {"step_ms": [1.0, '
                      '1.1, 0.9]}}')
    schema_only = tmp_path / "schema_only.json"
    schema_only.write_text('{"schema": "trainspeed.doctor/1"}')
    args = [a.format(report=report, schema_only=schema_only) for a in argv]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "trainspeed", *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=120)
    err = done.stderr.strip()
    assert done.returncode == 2, (done.returncode, err[-2000:])
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err[-2000:]
    assert err.startswith("trainspeed: error: "), err
