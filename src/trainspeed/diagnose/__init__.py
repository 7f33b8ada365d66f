"""From measurements to verdicts: pure rules and the step-time model behind their predictions."""

from trainspeed.diagnose.report import DoctorReport, diagnose_run
from trainspeed.diagnose.rules import Context, diagnose

__all__ = ["Context", "DoctorReport", "diagnose", "diagnose_run"]
