"""The doctor's result object: the hardware, the measurements, the verdicts, the script's fate; and `judge`, which
turns measurements and the machine's measured constants (a `Context`) into one. Nothing here measures: the probes
run in `trainspeed.measure`."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainspeed._render import Renders
from trainspeed.diagnose.invariants import checked
from trainspeed.diagnose.rules import Context, diagnose
from trainspeed.diagnose.scaling import with_scaling
from trainspeed.diagnose.tried import Tried
from trainspeed.diagnose.verdict import Verdict
from trainspeed.fix.result import Patch
from trainspeed.hardware.report import HardwareReport
from trainspeed.watch.result import WatchResult


@dataclass(frozen=True)
class DoctorReport(Renders):
    """What `trainspeed doctor` reports and `trainspeed.watch(...).result()` returns."""

    hardware: HardwareReport
    watch: WatchResult
    verdicts: list[Verdict]
    context: Context
    """The machine's constants the verdicts were judged with (the probes' readings after the run)."""
    script: str | None = None
    exit_code: int | None = None
    error: str | None = None
    """The script's traceback when it raised."""
    notes: list[str] = field(default_factory=list)
    command: str | None = None
    """The command line that made the report (`trainspeed doctor ...`), where one did."""
    when: str | None = None
    """When the report was made, local time ("YYYY-MM-DD HH:MM"), where a command made it."""
    process_s: float | None = None
    """`trainspeed doctor`: the script's process from its start to the script's end, seconds (the interpreter's and
    the imports' start-up, the script's set-up, the loop, what follows it); None from the Python API."""
    tried: Tried | None = None
    """`trainspeed doctor --try`: the levers applied and timed (None: not asked)."""
    patch: Patch | None = None
    """`trainspeed doctor --fix`: the verdicts' edits of the script (None: not asked)."""
    probes_s: float | None = None
    """Seconds the probes took after the run (the machine's constants the rules judge with); None where the context
    was given (recorded runs)."""

    def process_speedup(self, v: Verdict) -> float | None:
        """A verdict's predicted speed-up of the whole process, from its prediction for the training loop: the rest
        of the process (start-up, set-up, what follows the loop) as it was (Amdahl). None without both times."""
        loop, total = self.watch.steps.loop_s, self.process_s
        if not v.predicted_speedup or not loop or not total or loop > total:
            return None
        return round(total / (total - loop + loop / v.predicted_speedup), 2)

    @property
    def fate(self) -> str | None:
        """How the script ended, where that is news: interrupted (Ctrl-C, status 130), or its non-zero status."""
        if not self.exit_code:
            return None
        if self.exit_code == INTERRUPTED:
            return "interrupted (Ctrl-C): the report holds the steps until then"
        return f"the script exited with status {self.exit_code}"


INTERRUPTED = 130
"""The exit status of a script stopped by Ctrl-C (KeyboardInterrupt), as a shell reports it."""


def judge(result: WatchResult, ctx: Context, hardware: HardwareReport) -> DoctorReport:
    """The verdicts on `result`, judged with `ctx`, in a report (its numbers checked against each other)."""
    result = with_scaling(result)
    verdicts = diagnose(result, ctx)
    return DoctorReport(hardware=hardware, watch=result, verdicts=verdicts, context=ctx,
                        notes=checked(result, verdicts, ctx))
