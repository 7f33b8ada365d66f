"""The measurements after the run that a rule asks for, declared beside the rule.

A rule family's module lists the probes its rules read as `PROBES`; the registry gathers them (`registry.declared`);
`trainspeed.measure` takes each one a run wants, once, and hands the readings to every rule by name in
`Context.probed` (and the JSON report in its `probe` object). A new rule with a probe of its own touches its module,
the probe's and a test: the measuring code is named by its module and function, loaded only where the run wants it
(the rules import no torch; the probes do).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trainspeed.probe.readings import ProbeRun
from trainspeed.watch.result import WatchResult

__all__ = ["Probe", "ProbeRun"]


@dataclass(frozen=True)
class Probe:
    """One measurement after the run, and when a run wants it."""

    name: str
    """Its reading's name: the key in `Context.probed` and in the JSON report's `probe` object."""
    wanted: Callable[[WatchResult], bool]
    """Whether the run is worth the probe (asked of the run as measured, or as judged: `judged`)."""
    measure: str
    """"module:function" of the measuring code, given a `ProbeRun`; its reading (None: it measured nothing)."""
    judged: bool = True
    """`wanted` is asked of the run the script's verdicts are judged on (else of the run as measured)."""
