"""A `world-size` arm: K ranks launched by torchrun, the way a user scales out (no launcher of ours).

Processes cannot stay between the sweep's interleaved rounds without spinning or timing out in a
collective, so every trial is one launch: `python -m torch.distributed.run --standalone
--nproc-per-node K -m trainspeed.sweep.world_worker ...`. Start-up (interpreters, rendezvous,
building, warm-up) happens before the timed steps, which the ranks run between two barriers;
the trial's time is the slowest rank's. `build` makes one launch with no timed steps, so a world
size that cannot run fails before the rounds, and its start-up time is kept.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainspeed.sweep.arm import Setup
from trainspeed.sweep.world_worker import TAG

DIST_TIMEOUT_S = 120
"""Rendezvous and collective timeout inside the ranks (TRAINSPEED_DIST_TIMEOUT overrides it)."""


class RankError(RuntimeError):
    """A rank of a world-size trial failed; the message is that rank's one line."""


@dataclass(frozen=True)
class WorldConfig:
    workload: str
    """A spec other processes can resolve: a built-in name or FILE.py:FACTORY (absolute path)."""
    world: int
    device: str = "cpu"
    threads: int = 0
    """Intra-op threads per rank; 0: torch's default."""
    split_steps: int = 0
    """One rank: also time one process on batch/K (K = 2 ... 64) for this many steps when building."""


@dataclass
class WorldSetup(Setup):
    per_rank_ms: dict[str, float] = field(default_factory=dict)
    """One rank's build: ms per step of one process on batch/K, by K."""


def launch_command(c: WorldConfig, steps: int, warmup: int, out: str, split_steps: int = 0) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(c.world),
            "-m", "trainspeed.sweep.world_worker", "--workload", c.workload, "--device", c.device,
            "--steps", str(steps), "--warmup", str(warmup), "--threads", str(c.threads), "--split-steps", str(split_steps),
            "--out", out]


def launch_env(c: WorldConfig) -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])  # src/: the ranks import this same trainspeed
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    if c.threads:
        env["OMP_NUM_THREADS"] = str(c.threads)  # torchrun would otherwise set 1 and print a banner
    env.setdefault("TRAINSPEED_DIST_TIMEOUT", str(DIST_TIMEOUT_S))
    return env


def rank_failure(stderr: str, code: int) -> str:
    """The failing rank's own line; else what torchrun's failure summary says of the first failed
    rank (its exit code or signal); else the last line of words torchrun printed."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith(TAG):
            return ln[len(TAG):].strip()
    summary = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in lines)
               if k.strip() in ("rank", "exitcode", "traceback")}
    if "exitcode" in summary:
        why = summary.get("traceback", "")
        why = f": {why}" if why and not why.startswith("<") else ""
        return f"rank {summary.get('rank', '?')} ended with exit code {summary['exitcode']}{why}"
    words = [ln for ln in lines if any(ch.isalnum() for ch in ln)]
    return f"torchrun exited with status {code}: {words[-1][:200] if words else 'no output'}"


class WorldArm:
    """Same interface as sweep.arm.Arm (build, run, close), one torchrun launch per call."""

    def __init__(self, config: WorldConfig) -> None:
        self.config = config
        self.warmup = 3

    def _launch(self, steps: int, split_steps: int = 0) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="trainspeed-world-") as folder:
            out = os.path.join(folder, "rank0.json")
            err_path = os.path.join(folder, "stderr.txt")
            with open(err_path, "w") as err:
                proc = subprocess.Popen(launch_command(self.config, steps, self.warmup, out, split_steps), env=launch_env(self.config),
                                        stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
                try:
                    code = proc.wait()
                except BaseException:  # Ctrl-C: take the whole launch (agent and ranks) down with us
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    raise
            stderr = Path(err_path).read_text(errors="replace")
            if code != 0 or not os.path.exists(out):
                raise RankError(rank_failure(stderr, code))
            return json.loads(Path(out).read_text())

    def build(self, warmup: int) -> Setup:
        self.warmup = max(1, warmup)
        got = self._launch(0, self.config.split_steps)
        return WorldSetup(got["first_step_s"], got["warmup_step_s"], batch_size=got["batch"],
                          per_rank_ms=got.get("per_rank_ms") or {})

    def run(self, steps: int) -> tuple[float, dict[str, Any]]:
        got = self._launch(steps)
        extras = {"grad_bytes": got["grad_bytes"], "threads_per_rank": got["threads"]}
        for key in ("allreduce_s", "allreduce_one_s"):
            if got.get(key) is not None:
                extras[key.replace("_s", "_ms")] = got[key] * 1e3
        ranks = got.get("rank_seconds") or []
        if len(ranks) > 1:
            extras["rank_spread"] = (max(ranks) - min(ranks)) / max(ranks)
        return got["seconds"], extras

    def close(self) -> None:
        pass
