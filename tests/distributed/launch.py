"""Start K rank processes of a job the way torchrun would (environment variables), with a deadline.

The tests use this rather than torchrun where they need to see each rank's own exit: torchrun's
agent stops the other workers as soon as one fails, which would hide what our code does then.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

JOB = str(Path(__file__).with_name("ddp_job.py"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Rank:
    code: int
    out: str


def env_for(rank: int, world: int, port: int, **extra: str) -> dict[str, str]:
    # os.environ as the test left it: CUDA_VISIBLE_DEVICES="" hides a GPU from a CPU test's ranks
    return dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port), OMP_NUM_THREADS="1", **extra)


def launch(args: list[str], world: int = 2, timeout: float = 120, ranks: list[int] | None = None,
           doctor: list[str] | None = None, script: str = JOB, **extra: str) -> list[Rank]:
    """Run `python ddp_job.py ARGS` (or `script`) as ranks 0..world-1 (or only `ranks`); each one's exit code and
    output. `doctor`: run it as `python -m trainspeed doctor DOCTOR... ddp_job.py ARGS` instead."""
    port = free_port()
    head = [sys.executable, "-m", "trainspeed", "doctor", *doctor] if doctor is not None else [sys.executable]
    procs = [subprocess.Popen([*head, script, *args], env=env_for(r, world, port, **extra),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in (ranks if ranks is not None else range(world))]
    results = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(f"a rank did not finish within {timeout} s (hang)") from None
        results.append(Rank(p.returncode, out))
    return results
