"""Instrumentation of a live training loop.

`trainspeed.watch(...)` is both this package and the function that starts watching (DESIGN.md's
API): the package's module object is callable, so `import trainspeed.watch.syncs` keeps working.
"""

import sys
import types
from typing import Any

from trainspeed.watch.result import Verdict, WatchResult
from trainspeed.watch.session import StopWatching, Watcher, watch
from trainspeed.watch.syncs import SyncCounter

__all__ = ["StopWatching", "SyncCounter", "Verdict", "WatchResult", "Watcher", "watch"]


class _CallablePackage(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Watcher:
        return watch(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
