"""Instrumentation of a live training loop: measurements in, no verdicts (those are `diagnose/`'s).

`trainspeed.watch(...)` is both this package and the function that starts watching (docs/architecture.md):
`trainspeed/__init__.py` makes this package's module object callable (it starts a `trainspeed.doctor.Doctor`), so
`import trainspeed.watch.syncs` keeps working. The names below load on first use (PEP 562): importing one of this
package's modules does not import the watcher.
"""

from __future__ import annotations

from trainspeed._lazy import lazy_names

_WHERE = {"StopWatching": "trainspeed.watch.schedule", "SyncCounter": "trainspeed.watch.syncs",
          "WatchResult": "trainspeed.watch.result", "Watcher": "trainspeed.watch.session"}

__all__ = ["StopWatching", "SyncCounter", "WatchResult", "Watcher"]

__getattr__, __dir__ = lazy_names(__name__, _WHERE)
