"""From measurements to verdicts: pure rules and the step-time model behind their predictions."""

from trainspeed.diagnose.report import DoctorReport, judge
from trainspeed.diagnose.rules import Context, diagnose
from trainspeed.diagnose.verdict import Verdict

__all__ = ["Context", "DoctorReport", "Verdict", "diagnose", "judge"]
