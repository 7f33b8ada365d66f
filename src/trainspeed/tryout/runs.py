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

from trainspeed.diagnose.tried import LossCheck, NotTried, Tried, TriedLever, check_losses, speedup
from trainspeed.diagnose.verdict import Lever, Verdict
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
    warmup: int | None


@dataclass
class Arm:
    """One side of the tries: plain, one verdict's lever, or (a sweep of the script) a lever of its own; its runs'
    results in round order."""

    name: str
    verdict: Verdict | None
    runs: list[dict[str, Any]] = field(default_factory=list)
    failed: str | None = None
    own_lever: Lever | None = None
    source: str | None = None
    """The script's patched text this arm runs in place of its file (`doctor --fix --try`); None: the file."""

    @property
    def lever(self) -> Lever | None:
        """What this arm sets in its runs (None: a plain run)."""
        return self.own_lever if self.own_lever is not None else self.verdict.lever if self.verdict else None

    def ran(self, result: dict[str, Any]) -> None:
        """One run's results, in round order; a failed run (an error, or no timed training) fails the arm."""
        if result.get("error") or result.get("loop_s") is None:
            self.failed = result.get("error") or "fewer than two training steps: nothing to time"
        self.runs.append(result)


@dataclass(frozen=True)
class Patched:
    """A verdict's edit of the script as `--try` runs it: the lever that names it, and the script's text with it."""

    lever: Lever
    text: str


def candidates(verdicts: list[Verdict], k: int, patched: dict[str, Patched] | None = None,
               ) -> tuple[list[Verdict], list[NotTried]]:
    """The first `k` verdicts with a lever (or a patch, `patched` by verdict id), and the verdicts with a
    prediction ranked before the last of them that need an edit (the first `k` of those where none has a lever)."""
    chosen: list[Verdict] = []
    edits: list[NotTried] = []
    for v in verdicts:
        if len(chosen) == k:
            break
        if v.lever is not None or v.id in (patched or {}):
            chosen.append(v)
        elif v.predicted_speedup is not None:
            edits.append(NotTried(v.id, v.action, v.site))
    return chosen, edits if chosen else edits[:k]


def _name(rank: int, v: Verdict) -> str:
    """An arm's folder: the verdict's place in the diagnosis and its id ("3-thread_oversubscription")."""
    return f"{rank}-{v.id}"


def _run(arm: Arm, round_: int, script: Script, folder: Path, say: Callable[[str], None]) -> None:
    """One run of `arm`, its results appended (a failed one marks the arm failed)."""
    where = folder / arm.name
    where.mkdir(parents=True, exist_ok=True)
    lever = arm.lever
    result_path = where / f"arm-{round_}.json"
    source = None
    if arm.source is not None:
        source = where / "patched.py"
        if not source.exists():
            source.write_text(arm.source)
    spec = {"target": script.target, "args": script.args, "module": script.module, "steps": script.steps,
            "warmup": script.warmup, "script": (f"-m {script.target}" if script.module else script.target),
            "lever": dataclasses.asdict(lever) if lever is not None else None,
            "source": str(source) if source is not None else None,
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


def run_arms(arms: list[Arm], script: Script, rounds: int, folder: Path, say: Callable[[str], None]) -> bool:
    """Run every arm once a round over `rounds` rounds, each round's order the reverse of the one before; an arm that
    failed runs no more, and none runs once the first (the reference) failed. True: stopped by Ctrl-C."""
    try:
        for r in range(1, rounds + 1):
            order = arms if r % 2 else arms[::-1]
            for arm in order:
                if arm.failed is None and not arms[0].failed:
                    _run(arm, r, script, folder, say)
    except KeyboardInterrupt:
        return True
    return False


def try_levers(verdicts: list[Verdict], script: Script, k: int, rounds: int, out: Path | None = None,
               say: Callable[[str], None] = lambda _line: None, patched: dict[str, Patched] | None = None) -> Tried:
    """Try the levers of the first `k` of `verdicts` that have one (a diagnosis's, most important first) over
    `rounds` rounds; with `out`, each run's reports are kept under `out/tried/<arm>/`, else in a temporary folder
    removed afterwards. A verdict in `patched` (`doctor --fix`) is tried as its edit: the patched script runs."""
    patched = patched or {}
    chosen, edits = candidates(verdicts, k, patched)
    t0 = time.perf_counter()
    if not chosen:
        return Tried([], edits, rounds, script.steps, 0.0,
                     notes=["no verdict has a lever that applies without editing the script: nothing tried"])
    folder = out / "tried" if out is not None else Path(tempfile.mkdtemp(prefix="trainspeed-try-"))
    arms = [Arm(PLAIN, None)]
    for v in chosen:
        edit = patched.get(v.id)  # tried as its edit: its own lever names the patch's lines
        arms.append(Arm(_name(verdicts.index(v) + 1, v), v, own_lever=edit.lever if edit else None,
                        source=edit.text if edit else None))
    try:
        interrupted = run_arms(arms, script, rounds, folder, say)
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


@dataclass(frozen=True)
class Against:
    """An arm's runs against the plain ones, round by round: the training loop's seconds of the rounds both timed,
    the speed-up with its interval (`diagnose.tried.speedup`), and the losses' check of its first finished run."""

    plain_s: list[float]
    lever_s: list[float]
    measured: float | None
    interval: tuple[float, float] | None
    losses: LossCheck | None
    first: dict[str, Any] | None
    """The arm's first run that did not fail."""


def against(arm: Arm, plain: Arm) -> Against:
    """`arm`'s runs against `plain`'s (the tries' rows, a sweep's points)."""
    done = min(len(arm.runs), len(plain.runs))
    pairs = [(p["loop_s"], a["loop_s"]) for p, a in zip(plain.runs[:done], arm.runs[:done])
             if p.get("loop_s") and a.get("loop_s") and not p.get("error") and not a.get("error")]
    plain_s, lever_s = [p for p, _ in pairs], [a for _, a in pairs]
    measured, interval = speedup(plain_s, lever_s)
    finished = [run["losses"] for run in plain.runs if not run.get("error") and run.get("losses") is not None]
    ran = [run for run in arm.runs if not run.get("error")]
    losses = check_losses(finished, ran[0]["losses"]) if finished and ran else None
    return Against(plain_s, lever_s, measured, interval, losses, ran[0] if ran else None)


def _row(arm: Arm, plain: Arm, folder: Path | None) -> TriedLever:
    v, lever = arm.verdict, arm.lever
    assert v is not None and lever is not None
    a = against(arm, plain)
    failed = (f"failed: {arm.failed}" if arm.failed and not plain.failed else
              f"not timed: the plain run failed ({plain.failed})" if plain.failed else None)
    return TriedLever(v.id, lever, v.predicted_speedup, a.measured, a.interval, a.plain_s, a.lever_s, a.losses,
                      failed, after=a.first.get("first_verdict") if a.first else None,
                      folder=str(folder / arm.name) if folder is not None else None)
