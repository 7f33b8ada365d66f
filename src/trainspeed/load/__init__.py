"""The machine's load, in one place: what other processes kept busy and what the run's threads lost waiting for a core.

The rest of trainspeed asks this package questions; it does not carry the load's fields:

- the watcher builds a `LoadTracker` (`tracker.py`): the CPU counters at the two ends of the measured steps
  (`marks.py`), the phases' waits read at their edges from Linux's run-queue counts (`waits.py`), the run's threads
  sharing one CPU (`core_sharing.py`), joined into the result's `Load` part (`result.py`);
- the rules ask `others_busy(r)` and judge the script on `without_wait(r)`, the run less its waits (`view.py`,
  through the bounds of `wait_bounds.py` and the ops' lengths of `op_lengths.py`);
- the probes after the run read their own waits with `probe_waits` and keep their time on free cores with
  `on_free_cores` (`probes.py`).

The names below load on first use (PEP 562): `watch.result` imports `load.result`, and `load.view` imports
`watch.result`, so this package imports none of its modules by itself.
"""

from __future__ import annotations

from trainspeed._lazy import lazy_names

_WHERE = {
    "Load": "trainspeed.load.result", "PhaseLoad": "trainspeed.load.result", "StepWaits": "trainspeed.load.result",
    "OTHERS_BUSY": "trainspeed.load.result", "LoadTracker": "trainspeed.load.tracker",
    "JUDGED_APART": "trainspeed.load.view", "others_busy": "trainspeed.load.view", "waited_ms": "trainspeed.load.view",
    "waits_share": "trainspeed.load.view", "without_wait": "trainspeed.load.view",
    "FREE_CORE": "trainspeed.load.probes", "probe_waits": "trainspeed.load.probes",
    "on_free_cores": "trainspeed.load.probes", "less_wait": "trainspeed.load.probes",
    "threads_wait": "trainspeed.load.waits", "WaitMeter": "trainspeed.load.waits",
}

__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_names(__name__, _WHERE)
