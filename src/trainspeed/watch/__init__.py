"""Instrumentation of a live training loop."""

from trainspeed.watch.result import Verdict, WatchResult
from trainspeed.watch.session import StopWatching, Watcher, watch
from trainspeed.watch.syncs import SyncCounter

__all__ = ["StopWatching", "SyncCounter", "Verdict", "WatchResult", "Watcher", "watch"]
