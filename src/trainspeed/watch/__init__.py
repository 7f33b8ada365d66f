"""Instrumentation of a live training loop: measurements in, no verdicts (those are `diagnose/`'s).

`trainspeed.watch(...)` is both this package and the function that starts watching (docs/architecture.md):
`trainspeed/__init__.py` makes this package's module object callable (`trainspeed.doctor`), so
`import trainspeed.watch.syncs` keeps working.
"""

from trainspeed.watch.result import WatchResult
from trainspeed.watch.session import Watcher
from trainspeed.watch.steps import StopWatching
from trainspeed.watch.syncs import SyncCounter

__all__ = ["StopWatching", "SyncCounter", "WatchResult", "Watcher"]
