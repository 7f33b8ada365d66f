"""One run of `doctor --try`, in a process of its own: `python -m trainspeed.tryout.arm SPEC.json`. It applies the
spec's lever (none: a plain run) or runs its patched copy of the script (`source`), keeps the losses, runs the
script watched by the doctor for the same --steps as the diagnosis, times the training run (`diagnose.tried.TIMED`), and writes the run's doctor.json and its
`arm.json` ({"loop_s", "steps", "process_s", "exit_code", "error", "losses", "first_verdict"})."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trainspeed._io import write_atomic
from trainspeed.diagnose.verdict import Lever


@dataclass
class StepClock:
    """When the first training step ended (an optimizer's step, else a backward call), and the steps counted."""

    first: float | None = None
    steps: int = 0
    backwards: int = 0
    _first_backward: float | None = None

    def install(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        register_optimizer_step_post_hook(self._stepped)  # for the process's life: it is the run's own
        original = torch.autograd.backward

        def backward(*args: Any, **kwargs: Any) -> Any:
            done = original(*args, **kwargs)
            self.backwards += 1
            if self._first_backward is None:
                self._first_backward = time.perf_counter()
            return done

        torch.autograd.backward = backward

    def _stepped(self, *_args: Any) -> None:
        self.steps += 1
        if self.first is None:
            self.first = time.perf_counter()

    def loop_seconds(self, end: float) -> float | None:
        """From the first step's end to `end` (None: fewer than two steps)."""
        if self.steps >= 2 and self.first is not None:
            return end - self.first
        if self.steps == 0 and self.backwards >= 2 and self._first_backward is not None:
            return end - self._first_backward  # no optimizer: steps are backward calls
        return None


def _last_line(error: str | None, exit_code: int) -> str | None:
    if error:
        lines = [line for line in error.strip().splitlines() if line.strip()]
        return lines[-1].strip() if lines else "the script raised"
    return f"the script exited with status {exit_code}" if exit_code else None


def run(spec: dict[str, Any]) -> int:
    from trainspeed.doctor import script_report, watch_script
    from trainspeed.report.json import doctor_dict, dumps
    from trainspeed.tryout.levers import apply
    from trainspeed.tryout.losses import LossRecorder

    lever = Lever(**spec["lever"]) if spec.get("lever") else None
    result: dict[str, Any] = {"loop_s": None, "steps": 0, "process_s": None, "exit_code": 1, "error": None,
                              "losses": [], "first_verdict": None}
    try:
        if lever is not None:
            apply(lever)
    except Exception as e:  # a lever this torch or framework cannot take: the run fails, the others go on
        result["error"] = f"{type(e).__name__}: {e}"
        write_atomic(spec["result"], json.dumps(result))
        return 1
    losses, clock = LossRecorder(), StepClock()
    losses.install()
    clock.install()
    source = Path(spec["source"]).read_text() if spec.get("source") else None  # --fix's patched copy
    watcher, outcome, process_s = watch_script(spec["target"], spec["args"], spec["module"], warmup=spec["warmup"],
                                               steps=spec["steps"], source=source)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()  # the run ends when the device has done what the host queued
    end = time.perf_counter()
    losses.uninstall()
    result.update(loop_s=clock.loop_seconds(end), steps=clock.steps or clock.backwards,
                  process_s=process_s, exit_code=outcome.exit_code, error=_last_line(outcome.error, outcome.exit_code),
                  losses=losses.values())
    if outcome.exit_code == 0 or outcome.stopped_early:
        report = script_report(watcher, outcome, process_s, spec["script"])
        result["first_verdict"] = report.verdicts[0].id if report.verdicts else None
        write_atomic(spec["report"], dumps(doctor_dict(report)))
    write_atomic(spec["result"], json.dumps(result))
    return 0


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    return run(spec)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
