"""Run a sweep's arms in interleaved rounds, so slow drift of a shared machine hits every arm.

Round r visits the arms in an order rotated by r; each arm is built (and warmed up) on its first
visit and then timed once per round. A trial that raises (out of memory included) is recorded as
failed with its reason, the arm is dropped, and the sweep goes on. Every trial is appended to the
journal as it finishes; trials already there are not run again.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from trainspeed.sweep.arm import Arm, ArmConfig
from trainspeed.sweep.journal import Journal
from trainspeed.sweep.result import Trial
from trainspeed.workloads.workload import Workload


@dataclass(frozen=True)
class ArmSpec:
    value: str
    workload: Workload
    config: ArmConfig
    make: Callable[[], Any] | None = None
    """Builds an arm of another kind (same build/run/close) instead of sweep.arm.Arm."""


@dataclass
class RunOutput:
    trials: list[Trial]
    setups: dict[str, dict]
    resumed: int
    """Trials read back from the journal instead of run."""


def describe_error(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in text.lower():
        return f"out of memory: {text[:200]}"
    return f"{type(e).__name__}: {text[:200]}" if text else type(e).__name__


def rotated(items: list, r: int) -> list:
    k = r % len(items) if items else 0
    return items[k:] + items[:k]


def run_arms(specs: list[ArmSpec], steps: int, repeats: int, warmup: int, journal: Journal | None = None,
             on_trial: Callable[[Trial, int, int], None] | None = None,
             make_arm: Callable[[Workload, ArmConfig], Arm] = Arm) -> RunOutput:
    values = {s.value for s in specs}
    earlier, setups = journal.load() if journal else ([], {})
    trials = [t for t in earlier if t.value in values]
    have = {(t.value, t.repeat) for t in trials}
    failed = {t.value for t in trials if not t.ok}
    total = len(specs) * repeats
    done = sum(1 for s in specs for r in range(repeats) if (s.value, r) in have or s.value in failed)
    resumed = len(trials)
    arms: dict[str, Arm] = {}

    def record(t: Trial) -> None:
        nonlocal done
        trials.append(t)
        if journal:
            journal.trial(t)
        done += 1 if t.ok else sum(1 for r in range(t.repeat, repeats) if (t.value, r) not in have)
        if on_trial:
            on_trial(t, done, total)

    try:
        for r in range(repeats):
            for spec in rotated(specs, r):
                if spec.value in failed or (spec.value, r) in have:
                    continue
                gc.collect()
                try:
                    arm = arms.get(spec.value)
                    if arm is None:
                        made = spec.make() if spec.make else make_arm(spec.workload, spec.config)
                        arm = arms[spec.value] = made
                        setup = asdict(arm.build(warmup))
                        if spec.value not in setups:
                            setups[spec.value] = setup
                            if journal:
                                journal.setup(spec.value, setup)
                    seconds, extras = arm.run(steps)
                    record(Trial(spec.value, r, seconds, "", extras))
                except KeyboardInterrupt:
                    raise
                except Exception as e:  # the trial failed: say why, drop the arm, go on
                    failed.add(spec.value)
                    dropped = arms.pop(spec.value, None)
                    if dropped is not None:
                        dropped.close()
                    if torch.cuda.is_available():
                        torch.cuda.empty_cache()
                    record(Trial(spec.value, r, None, describe_error(e)))
    finally:
        for arm in arms.values():
            arm.close()
    return RunOutput(trials, setups, resumed)
