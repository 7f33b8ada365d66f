"""Instrumentation of a live training loop."""

from trainspeed.watch.syncs import SyncCounter

__all__ = ["SyncCounter"]
