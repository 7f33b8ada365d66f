"""`doctor --try`'s runs: for the first K verdicts with a lever, the script run again with the lever and without it,
alternated over R rounds (each round's order the reverse of the one before, so that a machine warming up or
slowing down weighs on every side alike), each run a process of its own (`arm.py`) bounded by the diagnosis's
--steps. Judged by `diagnose.tried`."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainspeed.diagnose.tried import NotTried, Tried, TriedLever, check_losses, speedup
from trainspeed.diagnose.verdict import Verdict
from trainspeed.tryout.levers import environment

PLAIN = "plain"
SHORT_RUN_S = 1.0
"""Plain runs whose timed training is shorter than this (the median) get a note: their ratios are noisy."""
STOP_WAIT_S = 5.0
"""After Ctrl-C, how long a run is given to end on its own before it is killed."""


@dataclass(frozen=True)
class Script:
    """What the diagnosis ran: the target, its arguments, whether it is a module, its --steps and --warmup."""

    target: str
    args: list[str]
    module: bool
    steps: int | None
    warmup: int


@dataclass
class _Arm:
    """One side of the tries: plain, or one verdict's lever; its runs' results in round order."""

    name: str
    verdict: Verdict | None
    runs: list[dict[str, Any]] = field(default_factory=list)
    failed: str | None = None

    def ran(self, result: dict[str, Any]) -> None:
        """One run's results, in round order; a failed run (an error, or no timed training) fails the arm."""
        if result.get("error") or result.get("loop_s") is None:
            self.failed = result.get("error") or "fewer than two training steps: nothing to time"
        self.runs.append(result)


def candidates(verdicts: list[Verdict], k: int) -> tuple[list[Verdict], list[NotTried]]:
    """The first `k` verdicts with a lever, and the verdicts with a prediction ranked before the last of them that
    need an edit (the first `k` of those where none has a lever)."""
    chosen: list[Verdict] = []
    edits: list[NotTried] = []
    for v in verdicts:
        if len(chosen) == k:
            break
        if v.lever is not None:
            chosen.append(v)
        elif v.predicted_speedup is not None:
            edits.append(NotTried(v.id, v.action, v.site))
    return chosen, edits if chosen else edits[:k]


def _name(rank: int, v: Verdict) -> str:
    """An arm's folder: the verdict's place in the diagnosis and its id ("3-thread_oversubscription")."""
    return f"{rank}-{v.id}"


def _run(arm: _Arm, round_: int, script: Script, folder: Path, say: Callable[[str], None]) -> None:
    """One run of `arm`, its results appended (a failed one marks the arm failed)."""
    where = folder / arm.name
    where.mkdir(parents=True, exist_ok=True)
    lever = arm.verdict.lever if arm.verdict is not None else None
    result_path = where / f"arm-{round_}.json"
    spec = {"target": script.target, "args": script.args, "module": script.module, "steps": script.steps,
            "warmup": script.warmup, "script": (f"-m {script.target}" if script.module else script.target),
            "lever": dataclasses.asdict(lever) if lever is not None else None,
            "report": str(where / f"doctor-{round_}.json"), "result": str(result_path)}
    spec_path = where / f"spec-{round_}.json"
    spec_path.write_text(json.dumps(spec))
    env = {**os.environ, **(environment(lever) if lever is not None else {})}
    say(f"trying {'without a lever' if lever is None else lever.paste}: round {round_}")
    with open(where / f"output-{round_}.txt", "wb") as log:
        child = subprocess.Popen([sys.executable, "-m", "trainspeed.tryout.arm", str(spec_path)], stdout=log,
                                 stderr=subprocess.STDOUT, env=env)
        try:
            child.wait()
        except KeyboardInterrupt:
            _stop(child)
            raise
    try:
        result = json.loads(result_path.read_text())
    except (OSError, ValueError):
        tail = (where / f"output-{round_}.txt").read_text(errors="replace").strip().splitlines()
        result = {"exit_code": child.returncode, "error": tail[-1] if tail else f"status {child.returncode}"}
    arm.ran(result)


def _stop(child: subprocess.Popen[bytes]) -> None:
    """Ctrl-C: the run is asked to stop (it got the terminal's SIGINT too, or gets it now), then killed."""
    if child.poll() is None:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def try_levers(verdicts: list[Verdict], script: Script, k: int, rounds: int, out: Path | None = None,
               say: Callable[[str], None] = lambda _line: None) -> Tried:
    """Try the levers of the first `k` of `verdicts` that have one (a diagnosis's, most important first) over
    `rounds` rounds; with `out`, each run's reports are kept under `out/tried/<arm>/`, else in a temporary folder
    removed afterwards."""
    chosen, edits = candidates(verdicts, k)
    t0 = time.perf_counter()
    if not chosen:
        return Tried([], edits, rounds, script.steps, 0.0,
                     notes=["no verdict has a lever that applies without editing the script: nothing tried"])
    folder = out / "tried" if out is not None else Path(tempfile.mkdtemp(prefix="trainspeed-try-"))
    arms = [_Arm(PLAIN, None)] + [_Arm(_name(verdicts.index(v) + 1, v), v) for v in chosen]
    interrupted = False
    try:
        for r in range(1, rounds + 1):
            order = arms if r % 2 else arms[::-1]
            for arm in order:
                if arm.failed is None and not arms[0].failed:
                    _run(arm, r, script, folder, say)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if out is None:
            shutil.rmtree(folder, ignore_errors=True)
    rows = [_row(arm, arms[0], folder if out is not None else None) for arm in arms[1:]]
    notes = []
    if arms[0].failed:
        notes.append(f"the plain run failed: {arms[0].failed}")
    timed = sorted(run["loop_s"] for run in arms[0].runs if run.get("loop_s"))
    if timed and timed[len(timed) // 2] < SHORT_RUN_S:
        notes.append(f"each plain run's timed training took {timed[len(timed) // 2]:.2f} s: a pause of the machine (a "
                     "garbage collection, another process) weighs on runs this short; more --steps steady the figures")
    return Tried(rows, edits, rounds, script.steps, time.perf_counter() - t0, interrupted, notes)


def _row(arm: _Arm, plain: _Arm, folder: Path | None) -> TriedLever:
    v = arm.verdict
    assert v is not None and v.lever is not None
    done = min(len(arm.runs), len(plain.runs))
    pairs = [(p["loop_s"], a["loop_s"]) for p, a in zip(plain.runs[:done], arm.runs[:done])
             if p.get("loop_s") and a.get("loop_s") and not p.get("error") and not a.get("error")]
    plain_s, lever_s = [p for p, _ in pairs], [a for _, a in pairs]
    measured, interval = speedup(plain_s, lever_s)
    finished = [run["losses"] for run in plain.runs if not run.get("error") and run.get("losses") is not None]
    ran = [run for run in arm.runs if not run.get("error")]
    losses = check_losses(finished, ran[0]["losses"]) if finished and ran else None
    failed = (f"failed: {arm.failed}" if arm.failed and not plain.failed else
              f"not timed: the plain run failed ({plain.failed})" if plain.failed else None)
    return TriedLever(v.id, v.lever, v.predicted_speedup, measured, interval, plain_s, lever_s, losses, failed,
                      after=ran[0].get("first_verdict") if ran else None,
                      folder=str(folder / arm.name) if folder is not None else None)
